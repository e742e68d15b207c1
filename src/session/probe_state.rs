//! The state file `wsgate probe mark` writes and `wsgate probe check` reads: the plan, the
//! sealed nonce and the evidence from before the pause. It never holds a token; it is
//! written atomically with mode 0600.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::marker::SealedNonce;
use super::protocol::MarkerPlan;
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

/// Why the state file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// It could not be read.
    #[error("cannot read the probe state {path}: {source}{}", hint(source))]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// It is not a probe state of this version.
    #[error("{path} is not a wsgate probe state: {detail}")]
    Invalid { path: PathBuf, detail: String },
    /// It could not be written.
    #[error("cannot write the probe state {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn hint(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::NotFound {
        " (run `wsgate probe mark` first)"
    } else {
        ""
    }
}

impl ProbeState {
    /// Reads and validates a state file.
    pub fn read(path: &Path) -> Result<Self, StateFileError> {
        let text = fs::read_to_string(path).map_err(|source| StateFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let state: ProbeState =
            serde_json::from_str(&text).map_err(|e| StateFileError::Invalid {
                path: path.to_owned(),
                detail: e.to_string(),
            })?;
        if state.schema != SCHEMA {
            return Err(StateFileError::Invalid {
                path: path.to_owned(),
                detail: format!("schema `{}`, expected `{SCHEMA}`", state.schema),
            });
        }
        Ok(state)
    }

    /// Writes the state file atomically (a temporary file beside it, then a rename).
    pub fn write(&self, path: &Path) -> Result<(), StateFileError> {
        write_private_json(path, self).map_err(|source| StateFileError::Write {
            path: path.to_owned(),
            source,
        })
    }
}

/// Writes `value` as pretty JSON to `path` atomically (a temporary file beside it, synced,
/// then renamed), readable by the owner only (mode 0600). Creates the parent directory.
pub fn write_private_json(path: &Path, value: &impl Serialize) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut file = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    fs::rename(&tmp, path)
}

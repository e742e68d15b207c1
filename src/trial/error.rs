//! The trial's one error type and its exit codes.

use crate::platform::pause::PauseError;
use crate::platform::volume::VolumeError;
use crate::platform::wait::WaitError;
use crate::platform::workspace::WorkspaceError;
use crate::session::SessionError;

/// Why a step of the trial could not complete (the restore verdict is separate: a trial
/// that completes may still decide `FreshSession`).
#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Wait(Box<WaitError>),
    /// The pause did not end within its budget; where the workspace's snapshots stood says
    /// why (it is almost always a checkpoint that does not end).
    #[error("{wait}; the workspace's PodSnapshots: {snapshots:?}")]
    PauseBudget {
        wait: Box<WaitError>,
        snapshots: Vec<String>,
    },
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("cannot {what}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The cluster no longer holds what the trial made.
    #[error("{0}")]
    Gone(String),
    /// The Workspace was deleted and made again by someone else: a namesake with another
    /// uid, which the trial leaves alone.
    #[error(
        "workspace {workspace} (uid {ours}) was replaced by a namesake (uid {theirs}); \
         wsgate leaves the namesake alone"
    )]
    Replaced {
        workspace: String,
        ours: String,
        theirs: String,
    },
    /// A config value or an input the trial needs is missing or damaged.
    #[error("{0}")]
    Config(String),
    /// The watch over the workspace's pods during the resume could not start.
    #[error("cannot watch the workspace's pods: {0}")]
    PodWatch(String),
    /// The watch over the Workspace during a pause or resume could not start.
    #[error("cannot watch the workspace: {0}")]
    WorkspaceWatch(String),
    /// Writing or reading the home volume's files through `pods/exec` failed.
    #[error(transparent)]
    Volume(#[from] VolumeError),
    /// The pause left no Ready snapshot: the platform's checkpoint failed.
    #[error("{0}")]
    NoSnapshot(String),
}

impl From<WaitError> for TrialError {
    fn from(e: WaitError) -> Self {
        TrialError::Wait(Box::new(e))
    }
}

/// A pause whose checkpoint failed left no snapshot: the platform failed already.
impl From<PauseError> for TrialError {
    fn from(e: PauseError) -> Self {
        match e {
            PauseError::Wait(e) => TrialError::Wait(Box::new(e)),
            e @ PauseError::CheckpointFailed { .. } => TrialError::NoSnapshot(e.to_string()),
        }
    }
}

impl TrialError {
    /// The process exit code for this error (see [`crate::exit_code`]).
    pub fn exit_code(&self) -> i32 {
        use crate::exit_code::*;
        match self {
            TrialError::Wait(_) | TrialError::PauseBudget { .. } => BUDGET,
            TrialError::Session(e) => e.exit_code(),
            TrialError::Config(_) => USAGE,
            TrialError::NoSnapshot(_) => FAILED,
            TrialError::Volume(VolumeError::Budget { .. }) => BUDGET,
            TrialError::Volume(VolumeError::Path { .. }) => USAGE,
            TrialError::Volume(_) => TARGET,
            TrialError::Workspace(_)
            | TrialError::Api { .. }
            | TrialError::Gone(_)
            | TrialError::Replaced { .. }
            | TrialError::PodWatch(_)
            | TrialError::WorkspaceWatch(_) => TARGET,
        }
    }
}

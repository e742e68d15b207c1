//! The pause/resume trial as typed steps: create (from config) -> Running -> mark -> pause
//! -> snapshot Ready -> resume -> platform evidence -> kernel evidence -> verdict. The
//! suite's steps, the gate (prepare and verify, possibly in two processes) and the drill all
//! call it; none of them re-implements a step.
//!
//! A [`Trial`] is one Workspace that this run created, bound to its uid: every write a step
//! makes (pause, resume, delete) names that uid, so a namesake is never touched. A step that
//! observes something returns when it happened, so callers stamp their timelines there and
//! not when they happen to look. One error type, [`TrialError`].
//!
//! The stateless kind (VS Code) runs the same create, pause and resume steps; instead of the
//! kernel's marker it writes files through exec before the pause and reads them back after
//! ([`stateless`]).

mod error;
mod evidence;
mod kernel;
mod stateless;
mod workspace;

pub use error::TrialError;
pub use evidence::PlatformSeen;
pub use kernel::{Marked, read_token, session_budgets};
pub use stateless::{CODE_SERVER_PORT, CodeServerHealth, EditorFiles};
pub use workspace::{Resumed, SnapshotRef, Trial};

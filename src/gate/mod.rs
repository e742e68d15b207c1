//! The release gate that spans a platform upgrade: [`prepare`] (before the upgrade) creates
//! a workspace, loads the model, stores the marker and the files, pauses, and writes a
//! [`GateState`]; [`verify`] (after the upgrade, possibly in another process on another
//! machine) resumes from that state alone and decides. The state file is the only hand-off
//! and holds no secret: the Jupyter token stays in the namespace's Secret, the nonce is sealed.
//! Both halves are the trial's steps ([`crate::trial`]), split by the upgrade.

mod page;
mod prepare;
mod state;
mod verify;

pub use prepare::{PrepareOptions, prepare};
pub use state::{GateState, SCHEMA, StateError};
pub use verify::{GateOutcome, GateVerdict, VerifyOptions, verify};

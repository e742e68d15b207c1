//! The simulator runtime: real `jupyter lab` processes standing in for workspace pods.
//!
//! - [`venv`]: the Python environment, in the user's cache directory keyed by the hash of
//!   the embedded requirements, built once, guarded by a stamp file and a lock.
//! - [`jupyter`]: one `jupyter lab` process (own process group, own runtime dir), its
//!   readiness wait, freeze/thaw (a checkpoint) and kill (a cold start or deletion).
//! - [`freeze`]: stopping and continuing a whole process tree through `/proc`, because each
//!   kernel runs in a session of its own and signalling the server's group misses it.

pub mod freeze;
pub mod jupyter;
pub mod venv;

//! Step definitions: thin glue from Gherkin phrases to `platform`, `session` and `verdict`.

pub mod capacity;
pub mod drill;
pub mod failure;
pub mod gate;
pub mod idle;
pub mod kernel;
pub mod snapshots;
pub mod stateless;
pub mod workspace;

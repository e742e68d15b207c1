//! The verification suite's glue: the cucumber World, the step definitions, the checks run
//! before anything is created (every step known and unambiguous), and the suite runner with
//! its cleanup hook. No logic of its own: steps call `platform`, `session` and `verdict`.

pub mod context;
pub mod features;
pub mod report;
pub mod runner;
pub mod steplog;
pub mod steps;
pub mod world;

pub use context::RunContext;
pub use runner::{SuiteError, SuiteOutcome, run};
pub use world::WsWorld;

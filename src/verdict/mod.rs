//! Pure restore verdict: evidence in, verdict out (no IO, no async, no clock).
//!
//! [`decide`] takes the evidence collected before the pause, after the resume, and the
//! platform's account of the resume, and returns a [`Verdict`]: `Restored`, `FreshSession`,
//! `FilesLost` or `Inconclusive`, with the evidence lines that decided it and every
//! [`Contradiction`] it found. The nonce held only in kernel memory is the decisive proof;
//! everything else corroborates it or is named as a contradiction. The evidence types live
//! here (in [`evidence`]) because they are pure data; `crate::session` collects them.
//!
//! The stateless kind (VS Code) has a verdict of its own, [`decide_files`]: its promise is
//! only that files, settings and extensions survive a pause (`FilesKept` / `FilesLost`).

pub mod evidence;

mod decide;
mod files;
mod outcome;

#[cfg(test)]
mod tests;

pub use decide::{decide, platform_restored, short_hash};
pub use evidence::{
    ConditionEvidence, DiskScan, EventEvidence, Evidence, FileState, KernelEvidence,
    MarkerObservation, ModelEvidence, Phase, PlatformEvidence, ProcessStart, RecoveryEvidence,
    ScanPlace, TickerEvidence,
};
pub use files::{FileCheck, FilesVerdict, FilesVerdictKind, decide_files};
pub use outcome::{Contradiction, FilesState, ProcessState, Verdict, VerdictKind};

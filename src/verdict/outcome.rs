//! The verdict: its kind, the process and file states behind it, the evidence lines that
//! decided it and the contradictions found on the way.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::evidence::Phase;
use crate::exit_code;

/// The restore verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum VerdictKind {
    /// The running process came back: the nonce is in kernel memory and the files are intact.
    Restored,
    /// The files are there, the process state is gone (a new process opened the same files).
    FreshSession,
    /// A file written before the pause is missing or changed after the resume.
    FilesLost,
    /// The evidence is missing or contradicts itself; `Verdict::reason` says why.
    Inconclusive,
}

impl fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VerdictKind::Restored => "Restored",
            VerdictKind::FreshSession => "FreshSession",
            VerdictKind::FilesLost => "FilesLost",
            VerdictKind::Inconclusive => "Inconclusive",
        })
    }
}

/// What the kernel evidence says about the process, on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessState {
    /// The nonce is in kernel memory, equal to the one stored.
    Restored,
    /// The nonce is gone.
    Fresh,
    /// No kernel answered, or the marker is not the one stored.
    Unknown,
}

/// What the file evidence says, on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilesState {
    /// Every file written before the pause was read back with the same checksum.
    Intact,
    /// At least one is missing, changed or unreadable.
    Lost,
    /// Files were written but nobody read them after the resume.
    NotObserved,
    /// No files were written before the pause.
    NotApplicable,
}

/// A named inconsistency in the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Contradiction {
    /// The platform reports a restore, but the nonce is gone from kernel memory.
    PlatformClaimsRestoreButNonceGone,
    /// The platform reports a restore, but the kernel cannot confirm its process came back:
    /// no kernel answered after the resume, or it holds a marker other than the one stored.
    /// A false restore like the one above (users are told their session came back).
    PlatformClaimsRestoreButKernelDisagrees { detail: String },
    /// The nonce was found on disk, so a fresh process could have read it: the test is invalid.
    NonceOnDisk { phase: Phase, paths: Vec<String> },
    /// The nonce survived in memory, but the disk scan could not cover a writable place a
    /// fresh kernel could have re-hydrated it from: the test cannot tell the two apart.
    DiskNotCovered { phase: Phase, places: Vec<String> },
    /// The PID is the same, but the nonce is gone. With the same start time too, it is the
    /// same process that lost its marker (a namespace reset), not a resume.
    PidEqualButNonceGone { same_start_time: bool },
    /// A marker is in kernel memory, but not the one this run stored.
    NonceDiffers,
    /// The nonce survived, but the platform observed no restore: was the workspace paused?
    NonceButNoPlatformRestore,
    /// The restore came from another snapshot than the one expected: the expected
    /// PodSnapshot's name is not in the `PodRestored` message.
    SnapshotNameMismatch {
        expected: String,
        found: Option<String>,
    },
    /// The nonce survived, but the PID changed.
    NonceButPidChanged { before: u32, after: u32 },
    /// The nonce survived, but the kernel is another one (its id changed).
    NonceButKernelChanged { before: String, after: String },
    /// The nonce survived, but the model in memory is not the same (`what` says how).
    ModelChanged { what: String },
    /// The nonce survived, but the ticker thread is not running any more.
    TickerStopped,
    /// The nonce survived, but the allocated GPU memory differs.
    GpuMemoryChanged { before: u64, after: u64 },
    /// Two sources read the same file differently after the resume.
    FileSourcesDisagree { file: String, detail: String },
}

impl Contradiction {
    /// Whether this contradiction makes the process evidence unusable (verdict Inconclusive
    /// unless files were lost). The others are reported beside the verdict.
    pub fn invalidates(&self) -> bool {
        match self {
            Contradiction::NonceOnDisk { .. }
            | Contradiction::DiskNotCovered { .. }
            | Contradiction::NonceDiffers
            | Contradiction::NonceButNoPlatformRestore
            | Contradiction::ModelChanged { .. }
            // A nonce read back with any identity changed is not a restore of this process.
            | Contradiction::NonceButPidChanged { .. }
            | Contradiction::NonceButKernelChanged { .. }
            | Contradiction::GpuMemoryChanged { .. } => true,
            Contradiction::PidEqualButNonceGone { same_start_time } => *same_start_time,
            Contradiction::PlatformClaimsRestoreButNonceGone
            | Contradiction::PlatformClaimsRestoreButKernelDisagrees { .. }
            | Contradiction::SnapshotNameMismatch { .. }
            | Contradiction::TickerStopped
            | Contradiction::FileSourcesDisagree { .. } => false,
        }
    }
}

impl fmt::Display for Contradiction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Contradiction::PlatformClaimsRestoreButNonceGone => write!(
                f,
                "the platform says the pod was restored, but the nonce is gone from kernel memory"
            ),
            Contradiction::PlatformClaimsRestoreButKernelDisagrees { detail } => {
                write!(f, "the platform says the pod was restored, but {detail}")
            }
            Contradiction::NonceOnDisk { phase, paths } => write!(
                f,
                "the nonce is on disk ({}; found {}: {}): a fresh process could have read it, so \
                 the test is invalid",
                match phase {
                    Phase::BeforePause => "before pause",
                    Phase::AfterResume => "after resume",
                },
                paths.len(),
                paths.join(", ")
            ),
            Contradiction::DiskNotCovered { phase, places } => write!(
                f,
                "the disk scan {} did not cover {} writable place(s) a fresh kernel could have \
                 re-hydrated the nonce from: {}; the nonce in memory does not prove a restore",
                match phase {
                    Phase::BeforePause => "before pause",
                    Phase::AfterResume => "after resume",
                },
                places.len(),
                places.join("; ")
            ),
            Contradiction::PidEqualButNonceGone {
                same_start_time: true,
            } => write!(
                f,
                "the PID and the process start time are unchanged, but the nonce is gone: the \
                 same process lost its marker (namespace reset?), which is not a resume"
            ),
            Contradiction::PidEqualButNonceGone {
                same_start_time: false,
            } => write!(
                f,
                "the PID is unchanged, but the nonce is gone (PID reuse in a new container?)"
            ),
            Contradiction::NonceDiffers => write!(
                f,
                "a marker is in kernel memory, but it is not the one this run stored"
            ),
            Contradiction::NonceButNoPlatformRestore => write!(
                f,
                "the nonce survived, but the platform reports no restore: was the workspace \
                 ever paused?"
            ),
            Contradiction::SnapshotNameMismatch { expected, found } => write!(
                f,
                "snapshot name not in the PodRestored message: expected PodSnapshot {expected}, \
                 the message says {}",
                found.as_deref().unwrap_or("nothing")
            ),
            Contradiction::NonceButPidChanged { before, after } => write!(
                f,
                "the nonce survived, but the PID changed from {before} to {after}"
            ),
            Contradiction::NonceButKernelChanged { before, after } => write!(
                f,
                "the nonce survived, but the kernel id changed from {before} to {after}"
            ),
            Contradiction::ModelChanged { what } => {
                write!(f, "the nonce survived, but the model did not: {what}")
            }
            Contradiction::TickerStopped => write!(
                f,
                "the nonce survived, but the background ticker thread is not running"
            ),
            Contradiction::GpuMemoryChanged { before, after } => write!(
                f,
                "the nonce survived, but allocated GPU memory changed from {before} to {after} bytes"
            ),
            Contradiction::FileSourcesDisagree { file, detail } => {
                write!(f, "sources disagree about `{file}`: {detail}")
            }
        }
    }
}

/// The verdict with everything that decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The verdict.
    pub kind: VerdictKind,
    /// What the kernel evidence says about the process.
    pub process: ProcessState,
    /// What the file evidence says.
    pub files: FilesState,
    /// For Inconclusive: why, in one sentence.
    pub reason: Option<String>,
    /// The evidence lines, decisive first.
    pub decided_by: Vec<String>,
    /// Every contradiction found.
    pub contradictions: Vec<Contradiction>,
}

impl Verdict {
    /// A false restore: the platform said the pod was restored (`PodRestored=True`) and the
    /// kernel says otherwise (its nonce is gone, no kernel answered, or it holds another
    /// marker). Whatever the verdict's kind, this is a failure of its own, the worst a
    /// release can ship: users are told their session came back. The suite, the gate, the
    /// drill, the reports and `report --compare` all ask this, and only this.
    pub fn false_restore(&self) -> bool {
        self.contradictions.iter().any(|c| {
            matches!(
                c,
                Contradiction::PlatformClaimsRestoreButNonceGone
                    | Contradiction::PlatformClaimsRestoreButKernelDisagrees { .. }
            )
        })
    }

    /// The verdict as tables and reports show it: its kind, and `(false restore)` after it
    /// when it is one.
    pub fn label(&self) -> String {
        if self.false_restore() {
            format!("{} (false restore)", self.kind)
        } else {
            self.kind.to_string()
        }
    }

    /// The process exit code for `wsgate probe check` (see `crate::exit_code`); a false
    /// restore is `FALSE_RESTORE` whatever the kind.
    pub fn exit_code(&self) -> i32 {
        if self.false_restore() {
            return exit_code::FALSE_RESTORE;
        }
        match self.kind {
            VerdictKind::Restored => exit_code::SUCCESS,
            VerdictKind::FreshSession => exit_code::FRESH_SESSION,
            VerdictKind::FilesLost => exit_code::FILES_LOST,
            VerdictKind::Inconclusive => exit_code::INCONCLUSIVE,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "verdict: {}", self.kind)?;
        if let Some(reason) = &self.reason {
            write!(f, " ({reason})")?;
        }
        writeln!(f)?;
        writeln!(f, "evidence:")?;
        for line in &self.decided_by {
            writeln!(f, "  - {line}")?;
        }
        if !self.contradictions.is_empty() {
            writeln!(f, "contradictions:")?;
            for c in &self.contradictions {
                let tag = if c.invalidates() {
                    " [invalidates]"
                } else {
                    ""
                };
                writeln!(f, "  - {c}{tag}")?;
            }
        }
        Ok(())
    }
}

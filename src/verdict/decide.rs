//! The decision: evidence in, [`Verdict`] out. Pure: no IO, no clock, no async.
//!
//! Order of judgement:
//! 1. Without a marker stored before the pause nothing can be decided (Inconclusive).
//! 2. Files: every file written before the pause is compared with every source that read it
//!    after the resume (the kernel, the Contents API, the platform's view of the volume). One
//!    missing, changed or unreadable file makes the verdict FilesLost, whatever the process.
//! 3. Process: the nonce in kernel memory is decisive (present and equal: restored; absent:
//!    fresh). PID, start time, kernel id, execution count, model, GPU memory, the ticker and
//!    the platform's restore claim corroborate it or are named as contradictions.
//! 4. A contradiction that invalidates the test (nonce on disk, a writable place the disk scan
//!    could not cover under a surviving nonce, another marker, a model that
//!    changed under a surviving nonce, a nonce the platform cannot explain, the same process
//!    without its marker) makes the verdict Inconclusive; so does a process nobody could ask
//!    or files nobody read back.

use std::collections::BTreeMap;

use super::evidence::{
    Evidence, FileState, KernelEvidence, MarkerObservation, Phase, PlatformEvidence,
};
use super::outcome::{Contradiction, FilesState, ProcessState, Verdict, VerdictKind};

/// Decides the verdict from the evidence before the pause, after the resume, and the
/// platform's account of the resume.
pub fn decide(before: &Evidence, after: &Evidence, platform: &PlatformEvidence) -> Verdict {
    let mut lines = Vec::new();
    let mut contradictions = Vec::new();
    let stored = match before.kernel.as_ref().map(|k| &k.marker) {
        Some(MarkerObservation::Present { digest }) => digest.clone(),
        Some(MarkerObservation::Absent) => {
            return inconclusive_early("the marker was not in kernel memory before the pause");
        }
        None => return inconclusive_early("no kernel evidence was collected before the pause"),
    };

    // Lines in order of weight: the process (the nonce first), the files, the disk scans.
    let mut file_lines = Vec::new();
    let mut disk_lines = Vec::new();
    let process = judge_process(
        &stored,
        before,
        after,
        platform,
        &mut lines,
        &mut contradictions,
    );
    let files = judge_files(
        before,
        after,
        platform,
        &mut file_lines,
        &mut contradictions,
    );
    judge_disk_scans(before, after, process, &mut disk_lines, &mut contradictions);
    lines.append(&mut file_lines);
    lines.append(&mut disk_lines);

    let invalidating = contradictions.iter().find(|c| c.invalidates());
    let (kind, reason) = if files == FilesState::Lost {
        (VerdictKind::FilesLost, None)
    } else if let Some(c) = invalidating {
        (VerdictKind::Inconclusive, Some(c.to_string()))
    } else if process == ProcessState::Unknown {
        let why = if after.kernel.is_none() {
            "no kernel could be asked after the resume"
        } else {
            "the marker in kernel memory is not the one stored"
        };
        (VerdictKind::Inconclusive, Some(why.to_owned()))
    } else if files == FilesState::NotObserved {
        (
            VerdictKind::Inconclusive,
            Some("nobody read the files back after the resume".to_owned()),
        )
    } else if process == ProcessState::Restored {
        (VerdictKind::Restored, None)
    } else {
        (VerdictKind::FreshSession, None)
    };
    Verdict {
        kind,
        process,
        files,
        reason,
        decided_by: lines,
        contradictions,
    }
}

fn inconclusive_early(reason: &str) -> Verdict {
    Verdict {
        kind: VerdictKind::Inconclusive,
        process: ProcessState::Unknown,
        files: FilesState::NotObserved,
        reason: Some(reason.to_owned()),
        decided_by: vec![format!("marker: {reason}")],
        contradictions: Vec::new(),
    }
}

/// The disk guard: the nonce found on disk invalidates the test whatever the process says;
/// a writable place the scan could not cover invalidates a nonce read back from memory (a
/// fresh kernel could have re-hydrated it from there). A process that lost the nonce is
/// fresh whatever the disk holds, so for it the gaps are only named.
fn judge_disk_scans(
    before: &Evidence,
    after: &Evidence,
    process: ProcessState,
    lines: &mut Vec<String>,
    contradictions: &mut Vec<Contradiction>,
) {
    let scans = [
        (Phase::BeforePause, before.disk_scan.as_ref()),
        (Phase::AfterResume, after.disk_scan.as_ref()),
    ];
    let mut scanned = 0;
    for (phase, scan) in scans {
        let Some(scan) = scan else { continue };
        scanned += 1;
        let when = match phase {
            Phase::BeforePause => "before pause",
            Phase::AfterResume => "after resume",
        };
        if !scan.hits.is_empty() {
            contradictions.push(Contradiction::NonceOnDisk {
                phase,
                paths: scan.hits.clone(),
            });
        } else {
            let places = if scan.places.is_empty() {
                format!("under {}", scan.roots.join(", "))
            } else {
                format!("in {}", scan.places_said())
            };
            let mut partial = Vec::new();
            if scan.skipped_unreadable > 0 {
                partial.push(format!(
                    "{} not readable by the kernel's user",
                    scan.skipped_unreadable
                ));
            }
            if scan.truncated {
                partial.push("walk cut short at the file limit".to_owned());
            }
            let partial = if partial.is_empty() {
                String::new()
            } else {
                format!(" ({})", partial.join("; "))
            };
            lines.push(format!(
                "disk {when}: nonce not found in {} files ({} bytes) changed since the marker \
                 {places}; {} older files not read{partial}",
                scan.files_scanned, scan.bytes_scanned, scan.skipped_older
            ));
        }
        let gaps = scan.gaps();
        if gaps.is_empty() {
            continue;
        }
        if process == ProcessState::Restored {
            contradictions.push(Contradiction::DiskNotCovered {
                phase,
                places: gaps,
            });
        } else {
            lines.push(format!(
                "disk {when}: not covered: {} (it does not change the verdict: the nonce was not \
                 read back from kernel memory)",
                gaps.join("; ")
            ));
        }
    }
    if scanned == 0 {
        lines.push("disk: not scanned for the nonce".to_owned());
    }
}

/// How one source's reading of one file compares with the baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileCheck {
    Same,
    Lost(String),
}

fn compare_file(expected: &str, seen: &FileState) -> FileCheck {
    match seen {
        FileState::Present { sha256, .. } if sha256 == expected => FileCheck::Same,
        FileState::Present { sha256, size } => FileCheck::Lost(format!(
            "changed (sha256 {} instead of {}, {size} bytes)",
            short(sha256),
            short(expected)
        )),
        FileState::Missing => FileCheck::Lost("missing".to_owned()),
        FileState::Unreadable { reason } => FileCheck::Lost(format!("unreadable ({reason})")),
    }
}

fn judge_files(
    before: &Evidence,
    after: &Evidence,
    platform: &PlatformEvidence,
    lines: &mut Vec<String>,
    contradictions: &mut Vec<Contradiction>,
) -> FilesState {
    // The baseline: what the kernel read before the pause, else what the server served.
    let baseline_source = before
        .kernel
        .as_ref()
        .map(|k| &k.files)
        .filter(|f| !f.is_empty())
        .or(before.files_via_server.as_ref());
    let baseline: BTreeMap<&String, &String> = baseline_source
        .into_iter()
        .flatten()
        .filter_map(|(name, state)| match state {
            FileState::Present { sha256, .. } => Some((name, sha256)),
            _ => None,
        })
        .collect();
    if baseline.is_empty() {
        lines.push("files: none were written before the pause".to_owned());
        return FilesState::NotApplicable;
    }

    let kernel_files = after.kernel.as_ref().map(|k| &k.files);
    let server_files = after.files_via_server.as_ref();
    // A volume read that finds none of the files while the kernel or the server finds one
    // unchanged looked in the wrong place (the kernel's working directory is not `$HOME`
    // in this image): not evidence of a loss.
    let volume = platform.files.as_ref().filter(|volume| {
        let none_there = baseline
            .keys()
            .all(|f| matches!(volume.get(*f), Some(FileState::Missing)));
        let seen_elsewhere = baseline.iter().any(|(f, sha)| {
            [kernel_files, server_files].into_iter().flatten().any(|src| {
                matches!(src.get(*f), Some(FileState::Present { sha256, .. }) if sha256 == *sha)
            })
        });
        let blind = none_there && seen_elsewhere;
        if blind {
            lines.push(
                "files on the volume: none found in $HOME through pods/exec although the \
                 kernel sees them (its working directory is elsewhere in this image): not counted"
                    .to_owned(),
            );
        }
        !blind
    });
    let sources: Vec<(&str, &BTreeMap<String, FileState>)> = [
        ("kernel", kernel_files),
        ("Contents API", server_files),
        ("volume", volume),
    ]
    .into_iter()
    .filter_map(|(name, files)| files.filter(|f| !f.is_empty()).map(|f| (name, f)))
    .collect();

    if let Some(why) = &platform.files_unread {
        lines.push(format!(
            "files on the volume: not read through pods/exec ({why})"
        ));
    }
    let mut lost = false;
    let mut observed = false;
    for (file, expected) in &baseline {
        let mut verdicts: Vec<(&str, FileCheck)> = Vec::new();
        for (source, files) in &sources {
            if let Some(seen) = files.get(*file) {
                verdicts.push((source, compare_file(expected, seen)));
            }
        }
        if verdicts.is_empty() {
            continue;
        }
        observed = true;
        let losses: Vec<String> = verdicts
            .iter()
            .filter_map(|(source, check)| match check {
                FileCheck::Lost(how) => Some(format!("{how} per the {source}")),
                FileCheck::Same => None,
            })
            .collect();
        let same: Vec<&str> = verdicts
            .iter()
            .filter(|(_, c)| *c == FileCheck::Same)
            .map(|(s, _)| *s)
            .collect();
        if losses.is_empty() {
            lines.push(format!(
                "file `{file}`: sha256 {} unchanged per the {}",
                short(expected),
                same.join(" and the ")
            ));
        } else {
            lost = true;
            lines.push(format!("file `{file}`: {}", losses.join("; ")));
            if !same.is_empty() {
                contradictions.push(Contradiction::FileSourcesDisagree {
                    file: (*file).clone(),
                    detail: format!(
                        "unchanged per the {}, but {}",
                        same.join(" and the "),
                        losses.join("; ")
                    ),
                });
            }
        }
    }
    if lost {
        FilesState::Lost
    } else if observed {
        FilesState::Intact
    } else {
        lines
            .push("files: written before the pause, but not read back after the resume".to_owned());
        FilesState::NotObserved
    }
}

fn judge_process(
    stored: &str,
    before: &Evidence,
    after: &Evidence,
    platform: &PlatformEvidence,
    lines: &mut Vec<String>,
    contradictions: &mut Vec<Contradiction>,
) -> ProcessState {
    let Some(a) = after.kernel.as_ref() else {
        if !after.kernel_listed {
            lines.push(format!(
                "kernel {}: no longer listed by the server, and no kernel could be asked",
                after.kernel_id
            ));
        } else {
            lines.push(format!(
                "kernel {}: did not answer after the resume",
                after.kernel_id
            ));
        }
        judge_platform(
            platform,
            ProcessState::Unknown,
            "no kernel answered after the resume",
            lines,
            contradictions,
        );
        return ProcessState::Unknown;
    };
    let b = before
        .kernel
        .as_ref()
        .expect("decide() returns early without kernel evidence before the pause");

    if !after.kernel_listed {
        lines.push(format!(
            "kernel {}: gone from the server; kernel {} was asked instead",
            after.kernel_id, a.kernel_id
        ));
    }
    let state = match &a.marker {
        MarkerObservation::Present { digest } if digest == stored => {
            lines.push(
                "nonce: in kernel memory and equal to the one stored before the pause (decisive)"
                    .to_owned(),
            );
            ProcessState::Restored
        }
        MarkerObservation::Present { .. } => {
            contradictions.push(Contradiction::NonceDiffers);
            ProcessState::Unknown
        }
        MarkerObservation::Absent => {
            lines.push("nonce: gone from kernel memory (decisive)".to_owned());
            ProcessState::Fresh
        }
    };

    corroborate_identity(b, a, state, lines, contradictions);
    corroborate_model(b, a, state, lines, contradictions);
    corroborate_ticker(a, state, lines, contradictions);
    if state == ProcessState::Fresh {
        describe_recovery(b, after, lines);
    }
    judge_platform(
        platform,
        state,
        "the kernel holds a marker other than the one stored before the pause",
        lines,
        contradictions,
    );
    state
}

fn same_start(b: &KernelEvidence, a: &KernelEvidence) -> Option<bool> {
    let (sb, sa) = (b.process_start.as_ref()?, a.process_start.as_ref()?);
    match (&sb.boot_id, &sa.boot_id) {
        (Some(x), Some(y)) if x != y => Some(false),
        _ => Some(sb.ticks_after_boot == sa.ticks_after_boot),
    }
}

fn corroborate_identity(
    b: &KernelEvidence,
    a: &KernelEvidence,
    state: ProcessState,
    lines: &mut Vec<String>,
    contradictions: &mut Vec<Contradiction>,
) {
    let same_pid = b.pid == a.pid;
    let start = same_start(b, a);
    lines.push(format!(
        "PID: {} before, {} after ({})",
        b.pid,
        a.pid,
        if same_pid { "equal" } else { "different" }
    ));
    lines.push(match start {
        Some(true) => "process start time: unchanged".to_owned(),
        Some(false) => {
            "process start time: changed (a new process, or a restore that reset it)".to_owned()
        }
        None => "process start time: not available".to_owned(),
    });
    match state {
        ProcessState::Restored if !same_pid => {
            contradictions.push(Contradiction::NonceButPidChanged {
                before: b.pid,
                after: a.pid,
            });
        }
        ProcessState::Fresh if same_pid => {
            contradictions.push(Contradiction::PidEqualButNonceGone {
                same_start_time: start == Some(true),
            });
        }
        _ => {}
    }
    lines.push(format!(
        "kernel id: {} before, {} after ({})",
        b.kernel_id,
        a.kernel_id,
        if b.kernel_id == a.kernel_id {
            "equal"
        } else {
            "different"
        }
    ));
    if state == ProcessState::Restored && b.kernel_id != a.kernel_id {
        contradictions.push(Contradiction::NonceButKernelChanged {
            before: b.kernel_id.clone(),
            after: a.kernel_id.clone(),
        });
    }
    if let (Some(x), Some(y)) = (&b.kernel_id_in_process, &a.kernel_id_in_process)
        && x != y
    {
        lines.push(format!("kernel id in the process: {x} before, {y} after"));
        if state == ProcessState::Restored && b.kernel_id == a.kernel_id {
            contradictions.push(Contradiction::NonceButKernelChanged {
                before: x.clone(),
                after: y.clone(),
            });
        }
    }
    let counter = if a.execution_count >= b.execution_count {
        "continues"
    } else {
        "restarted"
    };
    lines.push(format!(
        "execution count: {} before, {} after ({counter})",
        b.execution_count, a.execution_count
    ));
    if let (Some(x), Some(y)) = (&b.hostname, &a.hostname)
        && x != y
    {
        lines.push(format!("hostname: {x} before, {y} after"));
    }
}

fn corroborate_model(
    b: &KernelEvidence,
    a: &KernelEvidence,
    state: ProcessState,
    lines: &mut Vec<String>,
    contradictions: &mut Vec<Contradiction>,
) {
    match (&b.model, &a.model) {
        (None, _) => lines.push("model: none was loaded before the pause".to_owned()),
        (Some(mb), None) => {
            lines.push(format!(
                "model `{}`: not in kernel memory after the resume",
                mb.name
            ));
            if state == ProcessState::Restored {
                contradictions.push(Contradiction::ModelChanged {
                    what: "the model object is gone".to_owned(),
                });
            }
        }
        (Some(mb), Some(ma)) => {
            let hash_equal = mb.weight_hash == ma.weight_hash;
            let output_equal = mb.output_digest == ma.output_digest;
            let same_object = mb.object_id == ma.object_id;
            lines.push(format!(
                "model `{}`: weight hash {} ({}), output digest {} ({}), object {}",
                ma.name,
                short(&ma.weight_hash),
                if hash_equal { "equal" } else { "different" },
                short(&ma.output_digest),
                if output_equal { "equal" } else { "different" },
                if same_object {
                    "identical"
                } else {
                    "a different object"
                }
            ));
            if state == ProcessState::Restored {
                if !hash_equal {
                    contradictions.push(Contradiction::ModelChanged {
                        what: "the weight hash differs".to_owned(),
                    });
                } else if !same_object {
                    contradictions.push(Contradiction::ModelChanged {
                        what: "the model is a different object (reloaded, not restored)".to_owned(),
                    });
                } else if !output_equal {
                    contradictions.push(Contradiction::ModelChanged {
                        what: "the model's output differs".to_owned(),
                    });
                }
            }
        }
    }
    match (b.gpu_memory_allocated, a.gpu_memory_allocated) {
        (Some(x), Some(y)) => {
            lines.push(format!("GPU memory allocated: {x} bytes before, {y} after"));
            if state == ProcessState::Restored && x != y {
                contradictions.push(Contradiction::GpuMemoryChanged {
                    before: x,
                    after: y,
                });
            }
        }
        (Some(x), None) => {
            lines.push(format!(
                "GPU memory allocated: {x} bytes before, not reported after"
            ));
            // Device memory held before the pause must still be held by a restored process.
            if state == ProcessState::Restored && x > 0 {
                contradictions.push(Contradiction::GpuMemoryChanged {
                    before: x,
                    after: 0,
                });
            }
        }
        _ => {}
    }
}

fn corroborate_ticker(
    a: &KernelEvidence,
    state: ProcessState,
    lines: &mut Vec<String>,
    contradictions: &mut Vec<Contradiction>,
) {
    match &a.ticker {
        Some(t) if t.alive => lines.push(format!(
            "ticker: alive, {} ticks, longest gap {:.1} s monotonic / {:.1} s wall (the frozen gap)",
            t.ticks, t.max_gap_s, t.max_gap_wall_s
        )),
        Some(t) => {
            lines.push(format!("ticker: present but its thread stopped after {} ticks", t.ticks));
            if state == ProcessState::Restored {
                contradictions.push(Contradiction::TickerStopped);
            }
        }
        None => {
            lines.push("ticker: not running".to_owned());
            if state == ProcessState::Restored {
                contradictions.push(Contradiction::TickerStopped);
            }
        }
    }
}

fn describe_recovery(b: &KernelEvidence, after: &Evidence, lines: &mut Vec<String>) {
    let Some(r) = &after.recovery else { return };
    if !r.loaded {
        lines.push(format!(
            "application checkpoint: could not be loaded ({})",
            r.error.as_deref().unwrap_or("no reason given")
        ));
        return;
    }
    let Some(model) = &b.model else {
        lines.push("application checkpoint: loaded".to_owned());
        return;
    };
    let weights = r.weight_hash.as_deref() == Some(model.weight_hash.as_str());
    let output = r.output_digest.as_deref() == Some(model.output_digest.as_str());
    lines.push(format!(
        "application checkpoint: recovered; weights {} and output {} to before the pause",
        if weights { "equal" } else { "NOT equal" },
        if output { "equal" } else { "NOT equal" }
    ));
}

/// Without the kernel's evidence (a drill's workspaces outside its sample): whether the
/// platform says the pod was restored from the expected snapshot, `PodRestored=True` naming
/// it (any `True` when no snapshot was expected). The platform's word only, never
/// `Restored`: `Err` says what it said instead.
pub fn platform_restored(platform: &PlatformEvidence) -> Result<(), String> {
    let condition = platform.pod_restored.as_ref();
    let from_expected = condition.is_some_and(|c| c.status == "True")
        && (platform.expected_snapshot.is_none() || restored_snapshot(platform).is_some());
    if from_expected {
        return Ok(());
    }
    Err(match condition {
        Some(c) => format!(
            "PodRestored={} ({})",
            c.status,
            c.message.clone().unwrap_or_default()
        ),
        None => platform
            .said()
            .into_iter()
            .next()
            .unwrap_or_else(|| "platform: not observed".to_owned()),
    })
}

/// The expected snapshot's name, when the `PodRestored` message names it (GKE's check:
/// `strings.Contains(cond.Message, snapshotName)`).
fn restored_snapshot(platform: &PlatformEvidence) -> Option<String> {
    let expected = platform.expected_snapshot.as_deref()?;
    let message = platform.pod_restored.as_ref()?.message.as_deref()?;
    message.contains(expected).then(|| expected.to_owned())
}

/// What the platform said, against what the kernel says: a restore the platform claims
/// and the kernel does not confirm (`unknown_why` says why the process state is Unknown)
/// is a false restore.
fn judge_platform(
    platform: &PlatformEvidence,
    state: ProcessState,
    unknown_why: &str,
    lines: &mut Vec<String>,
    contradictions: &mut Vec<Contradiction>,
) {
    if !platform.observed {
        lines.push("platform: not observed (a plain Jupyter server)".to_owned());
        return;
    }
    lines.extend(platform.said());
    let claims = platform.claims_restore();
    match state {
        ProcessState::Restored if !claims => {
            contradictions.push(Contradiction::NonceButNoPlatformRestore);
        }
        ProcessState::Fresh if claims => {
            contradictions.push(Contradiction::PlatformClaimsRestoreButNonceGone);
        }
        ProcessState::Unknown if claims => {
            contradictions.push(Contradiction::PlatformClaimsRestoreButKernelDisagrees {
                detail: unknown_why.to_owned(),
            });
        }
        _ => {}
    }
    if claims
        && let Some(expected) = &platform.expected_snapshot
        && restored_snapshot(platform).is_none()
    {
        contradictions.push(Contradiction::SnapshotNameMismatch {
            expected: expected.clone(),
            found: platform
                .pod_restored
                .as_ref()
                .and_then(|c| c.message.clone()),
        });
    }
}

fn short(hash: &str) -> &str {
    short_hash(hash)
}

/// The first 12 characters of `hash` (whole characters: a hash from a foreign server may
/// not be ASCII).
pub fn short_hash(hash: &str) -> &str {
    match hash.char_indices().nth(12) {
        Some((end, _)) => &hash[..end],
        None => hash,
    }
}

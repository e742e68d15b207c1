//! Unit tests for [`decide`]: named scenarios, then every combination of the evidence
//! dimensions with the rules stated as properties.

use std::collections::BTreeMap;

use chrono::{TimeZone, Utc};

use super::*;
use crate::exit_code;

const STORED: &str = "d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1";
const OTHER: &str = "e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2";

fn file(sha: &str) -> FileState {
    FileState::Present {
        sha256: sha.to_owned(),
        size: 100,
    }
}

fn files(entries: &[(&str, FileState)]) -> BTreeMap<String, FileState> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn intact_files() -> BTreeMap<String, FileState> {
    files(&[
        ("input", file("aaaa")),
        ("checkpoint", file("bbbb")),
        ("output", file("cccc")),
    ])
}

fn model() -> ModelEvidence {
    ModelEvidence {
        name: "sim-tiny".to_owned(),
        weight_hash: "w0w0w0".to_owned(),
        object_id: 140_000,
        output_digest: "o0o0o0".to_owned(),
    }
}

fn kernel(marker: MarkerObservation, pid: u32, start_ticks: u64) -> KernelEvidence {
    KernelEvidence {
        kernel_id: "k-1".to_owned(),
        kernel_id_in_process: Some("k-1".to_owned()),
        marker,
        pid,
        process_start: Some(ProcessStart {
            ticks_after_boot: start_ticks,
            epoch_s: 1.0e9 + start_ticks as f64 / 100.0,
            boot_id: Some("boot-a".to_owned()),
        }),
        hostname: Some("pod-a".to_owned()),
        execution_count: 4,
        model: Some(model()),
        gpu_memory_allocated: None,
        resident_bytes: None,
        ticker: Some(TickerEvidence {
            alive: true,
            ticks: 50,
            interval_s: 0.1,
            max_gap_s: 0.2,
            max_gap_wall_s: 0.2,
            age_s: 5.0,
        }),
        files: intact_files(),
    }
}

fn present(digest: &str) -> MarkerObservation {
    MarkerObservation::Present {
        digest: digest.to_owned(),
    }
}

fn clean_scan() -> DiskScan {
    DiskScan {
        roots: vec!["/home/jovyan".to_owned()],
        files_scanned: 12,
        bytes_scanned: 4096,
        since_epoch_s: Some(1_764_676_800.0),
        skipped_unreadable: 0,
        skipped_older: 30,
        truncated: false,
        hits: Vec::new(),
        places: vec![
            place("home", "/home/jovyan", "/home/jovyan"),
            place("cwd", "/home/jovyan", "/home/jovyan"),
            place("tmp", "/tmp", "/tmp"),
            place("dev_shm", "/dev/shm", "/dev/shm"),
            place("ipython", "/home/jovyan/.ipython", "/home/jovyan"),
        ],
    }
}

fn place(what: &str, path: &str, within: &str) -> ScanPlace {
    ScanPlace {
        what: what.to_owned(),
        path: path.to_owned(),
        exists: true,
        writable: true,
        within: Some(within.to_owned()),
        covered: true,
        gap: None,
    }
}

fn evidence(phase: Phase, k: Option<KernelEvidence>) -> Evidence {
    Evidence {
        phase,
        collected_at: Utc.with_ymd_and_hms(2026, 12, 2, 12, 0, 0).unwrap(),
        kernel_id: "k-1".to_owned(),
        kernel_listed: true,
        kernel: k,
        files_via_server: Some(intact_files()),
        disk_scan: Some(clean_scan()),
        recovery: None,
        notes: Vec::new(),
    }
}

fn before() -> Evidence {
    evidence(Phase::BeforePause, Some(kernel(present(STORED), 42, 1000)))
}

fn restored_after() -> Evidence {
    let mut k = kernel(present(STORED), 42, 1000);
    k.ticker.as_mut().unwrap().max_gap_s = 6.5;
    evidence(Phase::AfterResume, Some(k))
}

fn fresh_after() -> Evidence {
    let mut k = kernel(MarkerObservation::Absent, 77, 9000);
    k.model = None;
    k.ticker = None;
    k.execution_count = 1;
    let mut e = evidence(Phase::AfterResume, Some(k));
    e.recovery = Some(RecoveryEvidence {
        loaded: true,
        weight_hash: Some("w0w0w0".to_owned()),
        output_digest: Some("o0o0o0".to_owned()),
        error: None,
    });
    e
}

fn gke_restored(name: &str) -> PlatformEvidence {
    PlatformEvidence {
        observed: true,
        pod_restored: Some(ConditionEvidence {
            status: "True".to_owned(),
            reason: Some("RestoreSucceeded".to_owned()),
            message: Some(format!("Restored from snapshot {name}")),
        }),
        expected_snapshot: Some("snap-1".to_owned()),
        restore_event: Some(EventEvidence {
            reason: "GKEPodSnapshotting".to_owned(),
            message: format!("Successfully restored from {name}"),
        }),
        ..PlatformEvidence::default()
    }
}

fn gke_cold() -> PlatformEvidence {
    PlatformEvidence {
        observed: true,
        expected_snapshot: Some("snap-1".to_owned()),
        ..PlatformEvidence::default()
    }
}

fn has(v: &Verdict, pred: impl Fn(&Contradiction) -> bool) -> bool {
    v.contradictions.iter().any(pred)
}

/// Asserts that one line of the verdict's reasoning says `text`.
#[track_caller]
fn said(v: &Verdict, text: &str) {
    assert!(v.decided_by.iter().any(|l| l.contains(text)), "{v}");
}

#[test]
fn frozen_and_thawed_process_is_restored() {
    let v = decide(
        &before(),
        &restored_after(),
        &PlatformEvidence::not_observed(),
    );
    assert_eq!(v.kind, VerdictKind::Restored, "{v}");
    assert_eq!(v.exit_code(), exit_code::SUCCESS);
    assert!(v.contradictions.is_empty(), "{v}");
    said(&v, "decisive");
    assert!(
        v.decided_by.iter().any(|l| l.contains("6.5 s")),
        "ticker gap: {v}"
    );
}

#[test]
fn gke_restore_with_matching_snapshot_is_restored() {
    let v = decide(&before(), &restored_after(), &gke_restored("snap-1"));
    assert_eq!(v.kind, VerdictKind::Restored, "{v}");
    assert!(v.contradictions.is_empty(), "{v}");
    assert!(
        v.decided_by
            .iter()
            .any(|l| l.starts_with("PodRestored: True")),
        "{v}"
    );
}

#[test]
fn restarted_kernel_is_a_fresh_session_with_recovery_described() {
    let v = decide(&before(), &fresh_after(), &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::FreshSession, "{v}");
    assert_eq!(v.exit_code(), exit_code::FRESH_SESSION);
    assert_eq!(v.files, FilesState::Intact);
    said(&v, "checkpoint: recovered; weights equal and output equal");
}

#[test]
fn server_restart_with_a_scratch_kernel_is_a_fresh_session() {
    let mut after = fresh_after();
    after.kernel_listed = false;
    after.kernel.as_mut().unwrap().kernel_id = "k-scratch".to_owned();
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::FreshSession, "{v}");
    said(&v, "k-scratch was asked instead");
}

#[test]
fn platform_claiming_restore_without_the_nonce_is_named() {
    let v = decide(&before(), &fresh_after(), &gke_restored("snap-1"));
    assert_eq!(v.kind, VerdictKind::FreshSession, "{v}");
    assert!(
        has(&v, |c| *c
            == Contradiction::PlatformClaimsRestoreButNonceGone),
        "{v}"
    );
    // A false restore, whatever the kind: its own label and exit code, never FreshSession's.
    assert!(v.false_restore());
    assert_eq!(v.label(), "FreshSession (false restore)");
    assert_eq!(v.exit_code(), exit_code::FALSE_RESTORE);
    // The same fresh session with no claim from the platform is a plain FreshSession.
    let plain = decide(&before(), &fresh_after(), &PlatformEvidence::not_observed());
    assert!(!plain.false_restore());
    assert_eq!(plain.label(), "FreshSession");
    assert_eq!(plain.exit_code(), exit_code::FRESH_SESSION);
}

/// The platform claims the restore and the kernel cannot confirm it: no kernel answers, or
/// it holds another marker. Before, these were plain Inconclusive in the suite and the
/// reports (exit 12) while the gate failed them as false restores (exit 14).
#[test]
fn a_claimed_restore_the_kernel_does_not_confirm_is_a_false_restore() {
    let mut silent = restored_after();
    silent.kernel = None;
    let v = decide(&before(), &silent, &gke_restored("snap-1"));
    assert_eq!(v.process, ProcessState::Unknown, "{v}");
    assert!(
        has(&v, |c| matches!(
            c,
            Contradiction::PlatformClaimsRestoreButKernelDisagrees { detail }
                if detail.contains("no kernel answered")
        )),
        "{v}"
    );
    assert!(v.false_restore());
    assert_eq!(v.exit_code(), exit_code::FALSE_RESTORE);
    assert!(v.label().ends_with("(false restore)"), "{}", v.label());

    let mut other = restored_after();
    other.kernel.as_mut().unwrap().marker = MarkerObservation::Present {
        digest: "not-the-stored-one".to_owned(),
    };
    let v = decide(&before(), &other, &gke_restored("snap-1"));
    assert!(has(&v, |c| *c == Contradiction::NonceDiffers), "{v}");
    assert!(
        has(&v, |c| matches!(
            c,
            Contradiction::PlatformClaimsRestoreButKernelDisagrees { detail }
                if detail.contains("other than the one stored")
        )),
        "{v}"
    );
    assert!(v.false_restore());

    // Without the platform's claim, the same evidence is a plain Inconclusive.
    let v = decide(&before(), &silent, &PlatformEvidence::not_observed());
    assert!(!v.false_restore(), "{v}");
    assert_eq!(v.exit_code(), exit_code::INCONCLUSIVE);
}

#[test]
fn nonce_on_disk_invalidates_the_test() {
    let mut after = restored_after();
    after.disk_scan.as_mut().unwrap().hits = vec!["notes.txt".to_owned()];
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::Inconclusive, "{v}");
    assert_eq!(v.exit_code(), exit_code::INCONCLUSIVE);
    assert!(v.reason.as_deref().unwrap().contains("notes.txt"), "{v}");
}

#[test]
fn a_writable_place_the_scan_did_not_cover_makes_a_surviving_nonce_inconclusive() {
    // The same evidence with every place covered is Restored.
    let covered = decide(
        &before(),
        &restored_after(),
        &PlatformEvidence::not_observed(),
    );
    assert_eq!(covered.kind, VerdictKind::Restored, "{covered}");
    assert!(
        covered
            .decided_by
            .iter()
            .any(|l| l.contains("dev_shm /dev/shm") && l.contains("tmp /tmp")),
        "the places covered are said: {covered}"
    );

    let mut after = restored_after();
    let shm = &mut after.disk_scan.as_mut().unwrap().places[3];
    shm.covered = false;
    shm.gap = Some("walk cut short: the file limit (1000) was reached".to_owned());
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::Inconclusive, "{v}");
    let reason = v.reason.as_deref().unwrap();
    assert!(
        reason.contains("dev_shm /dev/shm (walk cut short"),
        "{reason}"
    );
    assert!(has(&v, |c| matches!(
        c,
        Contradiction::DiskNotCovered { phase: Phase::AfterResume, places } if places.len() == 1
    )));

    // A place the kernel cannot write to, or that does not exist, holds nothing a fresh
    // kernel could have written: not a gap.
    let mut after = restored_after();
    let shm = &mut after.disk_scan.as_mut().unwrap().places[3];
    shm.covered = false;
    shm.writable = false;
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::Restored, "{v}");
}

#[test]
fn a_gap_in_the_scan_is_named_but_does_not_undo_a_fresh_session() {
    let mut after = fresh_after();
    let tmp = &mut after.disk_scan.as_mut().unwrap().places[2];
    tmp.covered = false;
    tmp.gap = Some("a directory could not be listed: EIO".to_owned());
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::FreshSession, "{v}");
    said(&v, "not covered: tmp /tmp (a directory could not be listed");
}

#[test]
fn every_contradiction_kind_is_in_the_report_schema() {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../schemas/report-v1.schema.json")).unwrap();
    let kinds = &schema["$defs"]["Contradiction"]["properties"]["kind"]["enum"];
    let all = [
        Contradiction::PlatformClaimsRestoreButNonceGone,
        Contradiction::PlatformClaimsRestoreButKernelDisagrees {
            detail: "d".to_owned(),
        },
        Contradiction::NonceOnDisk {
            phase: Phase::AfterResume,
            paths: Vec::new(),
        },
        Contradiction::DiskNotCovered {
            phase: Phase::AfterResume,
            places: Vec::new(),
        },
        Contradiction::PidEqualButNonceGone {
            same_start_time: true,
        },
        Contradiction::NonceDiffers,
        Contradiction::NonceButNoPlatformRestore,
        Contradiction::SnapshotNameMismatch {
            expected: "a".to_owned(),
            found: None,
        },
        Contradiction::NonceButPidChanged {
            before: 1,
            after: 2,
        },
        Contradiction::NonceButKernelChanged {
            before: "a".to_owned(),
            after: "b".to_owned(),
        },
        Contradiction::ModelChanged {
            what: "x".to_owned(),
        },
        Contradiction::TickerStopped,
        Contradiction::GpuMemoryChanged {
            before: 1,
            after: 2,
        },
        Contradiction::FileSourcesDisagree {
            file: "f".to_owned(),
            detail: "d".to_owned(),
        },
    ];
    for c in all {
        // A new variant must be added above (this match fails to compile otherwise).
        match &c {
            Contradiction::PlatformClaimsRestoreButNonceGone
            | Contradiction::PlatformClaimsRestoreButKernelDisagrees { .. }
            | Contradiction::NonceOnDisk { .. }
            | Contradiction::DiskNotCovered { .. }
            | Contradiction::PidEqualButNonceGone { .. }
            | Contradiction::NonceDiffers
            | Contradiction::NonceButNoPlatformRestore
            | Contradiction::SnapshotNameMismatch { .. }
            | Contradiction::NonceButPidChanged { .. }
            | Contradiction::NonceButKernelChanged { .. }
            | Contradiction::ModelChanged { .. }
            | Contradiction::TickerStopped
            | Contradiction::GpuMemoryChanged { .. }
            | Contradiction::FileSourcesDisagree { .. } => {}
        }
        let kind = serde_json::to_value(&c).unwrap()["kind"].clone();
        assert!(
            kinds.as_array().unwrap().contains(&kind),
            "{kind} is missing from the schema's Contradiction kinds"
        );
    }
}

#[test]
fn same_pid_and_start_time_without_nonce_is_a_reset_not_a_resume() {
    let mut after = fresh_after();
    let k = after.kernel.as_mut().unwrap();
    k.pid = 42;
    k.process_start = before().kernel.unwrap().process_start;
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::Inconclusive, "{v}");
    assert!(has(&v, |c| *c
        == Contradiction::PidEqualButNonceGone {
            same_start_time: true
        }));
}

#[test]
fn same_pid_in_a_new_process_is_noted_but_fresh() {
    let mut after = fresh_after();
    after.kernel.as_mut().unwrap().pid = 42;
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::FreshSession, "{v}");
    assert!(has(&v, |c| *c
        == Contradiction::PidEqualButNonceGone {
            same_start_time: false
        }));
}

#[test]
fn start_times_from_different_boots_are_not_equal() {
    let mut after = fresh_after();
    let k = after.kernel.as_mut().unwrap();
    k.pid = 42;
    k.process_start = Some(ProcessStart {
        ticks_after_boot: 1000,
        epoch_s: 2.0e9,
        boot_id: Some("boot-b".to_owned()),
    });
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::FreshSession, "{v}");
}

#[test]
fn a_missing_checkpoint_is_files_lost_even_when_restored() {
    let mut after = restored_after();
    after
        .kernel
        .as_mut()
        .unwrap()
        .files
        .insert("checkpoint".to_owned(), FileState::Missing);
    after
        .files_via_server
        .as_mut()
        .unwrap()
        .insert("checkpoint".to_owned(), FileState::Missing);
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::FilesLost, "{v}");
    assert_eq!(v.process, ProcessState::Restored);
    assert_eq!(v.exit_code(), exit_code::FILES_LOST);
    said(&v, "`checkpoint`: missing");
    assert!(v.contradictions.is_empty(), "{v}");
}

#[test]
fn sources_that_disagree_about_a_file_are_named_and_loss_wins() {
    let mut after = fresh_after();
    after
        .files_via_server
        .as_mut()
        .unwrap()
        .insert("output".to_owned(), file("ffff"));
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::FilesLost, "{v}");
    assert!(has(
        &v,
        |c| matches!(c, Contradiction::FileSourcesDisagree { file, .. } if file == "output")
    ));
}

#[test]
fn the_volume_view_from_the_platform_counts_as_a_source() {
    let mut after = restored_after();
    after.kernel = None;
    after.files_via_server = None;
    let mut platform = gke_restored("snap-1");
    platform.files = Some(files(&[("input", FileState::Missing)]));
    let v = decide(&before(), &after, &platform);
    assert_eq!(v.kind, VerdictKind::FilesLost, "{v}");
    said(&v, "per the volume");
}

/// A volume read that finds none of the files the kernel finds unchanged looked in the
/// wrong directory: said, not counted, and the restore stays Restored. When the kernel
/// finds them gone too, the volume's word counts.
#[test]
fn a_volume_that_finds_nothing_where_the_kernel_finds_everything_is_not_counted() {
    let mut platform = gke_restored("snap-1");
    platform.files = Some(files(&[
        ("input", FileState::Missing),
        ("checkpoint", FileState::Missing),
        ("output", FileState::Missing),
    ]));
    let v = decide(&before(), &restored_after(), &platform);
    assert_eq!(v.kind, VerdictKind::Restored, "{v}");
    assert!(
        v.decided_by
            .iter()
            .any(|l| l.starts_with("files on the volume: none found in $HOME")),
        "{v}"
    );
    // One file really gone on the volume while the others are there: a loss.
    let mut one_gone = intact_files();
    one_gone.insert("input".to_owned(), FileState::Missing);
    platform.files = Some(one_gone);
    let v = decide(&before(), &restored_after(), &platform);
    assert_eq!(v.kind, VerdictKind::FilesLost, "{v}");
}

/// The volume could not be read through pods/exec: said, and the other sources decide.
#[test]
fn a_volume_that_could_not_be_read_is_said_and_the_other_sources_decide() {
    let mut platform = gke_restored("snap-1");
    platform.files_unread = Some("pods/exec into pod p: 403 Forbidden".to_owned());
    let v = decide(&before(), &restored_after(), &platform);
    assert_eq!(v.kind, VerdictKind::Restored, "{v}");
    assert!(
        v.decided_by.iter().any(|l| l
            == "files on the volume: not read through pods/exec (pods/exec into pod p: 403 Forbidden)"),
        "{v}"
    );
}

#[test]
fn no_marker_before_the_pause_is_inconclusive() {
    let mut b = before();
    b.kernel.as_mut().unwrap().marker = MarkerObservation::Absent;
    let v = decide(&b, &restored_after(), &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::Inconclusive);
    let v = decide(
        &evidence(Phase::BeforePause, None),
        &restored_after(),
        &gke_cold(),
    );
    assert_eq!(v.kind, VerdictKind::Inconclusive);
    assert!(v.reason.unwrap().contains("before the pause"));
}

#[test]
fn restored_with_a_changed_model_is_inconclusive() {
    let mut after = restored_after();
    after
        .kernel
        .as_mut()
        .unwrap()
        .model
        .as_mut()
        .unwrap()
        .weight_hash = "corrupt".to_owned();
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::Inconclusive, "{v}");
    assert!(has(&v, |c| matches!(c, Contradiction::ModelChanged { .. })));
}

#[test]
fn a_stopped_ticker_under_a_surviving_nonce_is_noted_beside_restored() {
    let mut after = restored_after();
    after
        .kernel
        .as_mut()
        .unwrap()
        .ticker
        .as_mut()
        .unwrap()
        .alive = false;
    let v = decide(&before(), &after, &PlatformEvidence::not_observed());
    assert_eq!(v.kind, VerdictKind::Restored, "{v}");
    assert!(has(&v, |c| *c == Contradiction::TickerStopped));
}

/// Each identity change under a nonce that was read back: before, each of these evidence
/// sets was called Restored. Now each is Inconclusive, naming the change.
#[test]
fn a_surviving_nonce_with_any_identity_change_is_inconclusive_naming_it() {
    let gpu_before = || {
        let mut b = before();
        b.kernel.as_mut().unwrap().gpu_memory_allocated = Some(6_000_000_000);
        b
    };
    type Change = fn(&mut KernelEvidence);
    let cases: [(&str, Change, &str); 6] = [
        ("pid", |k| k.pid += 1, "the PID changed"),
        (
            "kernel id",
            |k| k.kernel_id = "another-kernel".into(),
            "the kernel id changed",
        ),
        (
            "kernel id in the process",
            |k| k.kernel_id_in_process = Some("another-kernel".into()),
            "the kernel id changed",
        ),
        (
            "model object",
            |k| k.model.as_mut().unwrap().object_id += 1,
            "a different object",
        ),
        (
            "gpu memory",
            |k| k.gpu_memory_allocated = Some(5_000_000_000),
            "allocated GPU memory changed",
        ),
        (
            "gpu memory gone",
            |k| k.gpu_memory_allocated = None,
            "allocated GPU memory changed from 6000000000 to 0",
        ),
    ];
    for (what, change, says) in cases {
        let mut b = gpu_before();
        b.kernel.as_mut().unwrap().kernel_id_in_process =
            Some(b.kernel.as_ref().unwrap().kernel_id.clone());
        let mut after = restored_after();
        {
            let k = after.kernel.as_mut().unwrap();
            k.gpu_memory_allocated = Some(6_000_000_000);
            k.kernel_id_in_process = Some(k.kernel_id.clone());
        }
        // Unchanged, the same evidence is Restored.
        let v = decide(&b, &after, &PlatformEvidence::not_observed());
        assert_eq!(v.kind, VerdictKind::Restored, "{what}: {v}");
        change(after.kernel.as_mut().unwrap());
        let v = decide(&b, &after, &PlatformEvidence::not_observed());
        assert_eq!(v.kind, VerdictKind::Inconclusive, "{what}: {v}");
        let reason = v.reason.clone().unwrap_or_default();
        assert!(reason.contains(says), "{what}: {reason}");
    }
}

#[test]
fn verdict_text_lists_evidence_and_tags_invalidating_contradictions() {
    let mut after = restored_after();
    after.disk_scan.as_mut().unwrap().hits = vec!["history.sqlite".to_owned()];
    let text = decide(&before(), &after, &PlatformEvidence::not_observed()).to_string();
    assert!(text.starts_with("verdict: Inconclusive ("), "{text}");
    assert!(text.contains("evidence:\n  - "), "{text}");
    assert!(text.contains("[invalidates]"), "{text}");
}

// --- every combination -------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum MarkerAfter {
    Equal,
    Different,
    Absent,
    NoKernel,
}
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ident {
    SamePidSameStart,
    SamePidNewStart,
    NewPid,
}
#[derive(Debug, Clone, Copy, PartialEq)]
enum Files {
    Intact,
    Missing,
    Changed,
    NotReadBack,
}
#[derive(Debug, Clone, Copy, PartialEq)]
enum Disk {
    Clean,
    HitBefore,
    HitAfter,
    NotScanned,
}
#[derive(Debug, Clone, Copy, PartialEq)]
enum Platform {
    NotObserved,
    Restored,
    RestoredOtherSnapshot,
    Cold,
}
#[derive(Debug, Clone, Copy, PartialEq)]
enum Model {
    Same,
    WeightsChanged,
    Gone,
}

fn build(
    m: MarkerAfter,
    id: Ident,
    f: Files,
    d: Disk,
    p: Platform,
    md: Model,
) -> (Evidence, Evidence, PlatformEvidence) {
    let mut b = before();
    let mut a = restored_after();
    {
        let k = a.kernel.as_mut().unwrap();
        match m {
            MarkerAfter::Equal | MarkerAfter::NoKernel => {}
            MarkerAfter::Different => k.marker = present(OTHER),
            MarkerAfter::Absent => k.marker = MarkerObservation::Absent,
        }
        match id {
            Ident::SamePidSameStart => {}
            Ident::SamePidNewStart => k.process_start.as_mut().unwrap().ticks_after_boot = 5555,
            Ident::NewPid => {
                k.pid = 99;
                k.process_start.as_mut().unwrap().ticks_after_boot = 5555;
            }
        }
        match md {
            Model::Same => {}
            Model::WeightsChanged => k.model.as_mut().unwrap().weight_hash = "zz".to_owned(),
            Model::Gone => k.model = None,
        }
        match f {
            Files::Intact => {}
            Files::Missing => {
                k.files.insert("input".to_owned(), FileState::Missing);
            }
            Files::Changed => {
                k.files.insert("output".to_owned(), file("9999"));
            }
            Files::NotReadBack => k.files.clear(),
        }
    }
    match f {
        Files::Missing => {
            a.files_via_server
                .as_mut()
                .unwrap()
                .insert("input".to_owned(), FileState::Missing);
        }
        Files::Changed => {
            a.files_via_server
                .as_mut()
                .unwrap()
                .insert("output".to_owned(), file("9999"));
        }
        Files::NotReadBack => a.files_via_server = None,
        Files::Intact => {}
    }
    if m == MarkerAfter::NoKernel {
        // Without a kernel only the Contents API reads files back.
        a.kernel = None;
    }
    match d {
        Disk::Clean => {}
        Disk::HitBefore => b.disk_scan.as_mut().unwrap().hits = vec!["a".to_owned()],
        Disk::HitAfter => a.disk_scan.as_mut().unwrap().hits = vec!["b".to_owned()],
        Disk::NotScanned => {
            b.disk_scan = None;
            a.disk_scan = None;
        }
    }
    let platform = match p {
        Platform::NotObserved => PlatformEvidence::not_observed(),
        Platform::Restored => gke_restored("snap-1"),
        Platform::RestoredOtherSnapshot => gke_restored("snap-0"),
        Platform::Cold => gke_cold(),
    };
    (b, a, platform)
}

#[test]
fn every_combination_obeys_the_rules() {
    use Disk as D;
    use Files as F;
    use MarkerAfter as M;
    let mut seen = std::collections::HashMap::new();
    for m in [M::Equal, M::Different, M::Absent, M::NoKernel] {
        for id in [
            Ident::SamePidSameStart,
            Ident::SamePidNewStart,
            Ident::NewPid,
        ] {
            for f in [F::Intact, F::Missing, F::Changed, F::NotReadBack] {
                for d in [D::Clean, D::HitBefore, D::HitAfter, D::NotScanned] {
                    for p in [
                        Platform::NotObserved,
                        Platform::Restored,
                        Platform::RestoredOtherSnapshot,
                        Platform::Cold,
                    ] {
                        for md in [Model::Same, Model::WeightsChanged, Model::Gone] {
                            let (b, a, pe) = build(m, id, f, d, p, md);
                            let v = decide(&b, &a, &pe);
                            let case = format!("{m:?} {id:?} {f:?} {d:?} {p:?} {md:?}\n{v}");
                            check_rules(m, id, f, d, p, md, &v, &case);
                            *seen.entry(v.kind).or_insert(0) += 1;
                        }
                    }
                }
            }
        }
    }
    // The product reaches every verdict.
    assert_eq!(seen.len(), 4, "{seen:?}");
}

#[allow(clippy::too_many_arguments)]
fn check_rules(
    m: MarkerAfter,
    id: Ident,
    f: Files,
    d: Disk,
    p: Platform,
    md: Model,
    v: &Verdict,
    case: &str,
) {
    // Always: evidence lines, a reason for Inconclusive, the exit code table.
    assert!(!v.decided_by.is_empty(), "{case}");
    assert_eq!(
        v.kind == VerdictKind::Inconclusive,
        v.reason.is_some(),
        "{case}"
    );
    // A false restore: the platform claims one and the kernel says otherwise (the nonce is
    // gone, another marker, no kernel). Its own exit code.
    let false_restore = matches!(p, Platform::Restored | Platform::RestoredOtherSnapshot)
        && m != MarkerAfter::Equal;
    assert_eq!(v.false_restore(), false_restore, "{case}");
    let code = match v.kind {
        _ if false_restore => exit_code::FALSE_RESTORE,
        VerdictKind::Restored => exit_code::SUCCESS,
        VerdictKind::FreshSession => exit_code::FRESH_SESSION,
        VerdictKind::FilesLost => exit_code::FILES_LOST,
        VerdictKind::Inconclusive => exit_code::INCONCLUSIVE,
    };
    assert_eq!(v.exit_code(), code, "{case}");

    // Files written before the pause and missing or changed after: FilesLost, always.
    let lost = matches!(f, Files::Missing | Files::Changed);
    assert_eq!(v.kind == VerdictKind::FilesLost, lost, "{case}");
    if lost {
        return;
    }

    // The nonce on disk is always named and always invalidates.
    let on_disk = matches!(d, Disk::HitBefore | Disk::HitAfter);
    assert_eq!(
        has(v, |c| matches!(c, Contradiction::NonceOnDisk { .. })),
        on_disk,
        "{case}"
    );
    if on_disk {
        assert_eq!(v.kind, VerdictKind::Inconclusive, "{case}");
    }

    // Process state follows the nonce alone.
    let expected_process = match m {
        MarkerAfter::Equal => ProcessState::Restored,
        MarkerAfter::Absent => ProcessState::Fresh,
        MarkerAfter::Different | MarkerAfter::NoKernel => ProcessState::Unknown,
    };
    assert_eq!(v.process, expected_process, "{case}");

    // Restored needs: equal nonce, the same process (PID), files read back intact, a clean
    // disk, the same model, and no platform that saw no restore.
    let restored_ok = m == MarkerAfter::Equal
        && id != Ident::NewPid
        && f == Files::Intact
        && !on_disk
        && md == Model::Same
        && p != Platform::Cold;
    assert_eq!(v.kind == VerdictKind::Restored, restored_ok, "{case}");

    // FreshSession needs: nonce gone, files read back intact, a clean disk, and not the
    // very same process (same PID and start time).
    let fresh_ok =
        m == MarkerAfter::Absent && f == Files::Intact && !on_disk && id != Ident::SamePidSameStart;
    assert_eq!(v.kind == VerdictKind::FreshSession, fresh_ok, "{case}");

    // Named contradictions.
    let claims = matches!(p, Platform::Restored | Platform::RestoredOtherSnapshot);
    assert_eq!(
        has(v, |c| *c
            == Contradiction::PlatformClaimsRestoreButNonceGone),
        m == MarkerAfter::Absent && claims,
        "{case}"
    );
    assert_eq!(
        has(v, |c| matches!(
            c,
            Contradiction::PidEqualButNonceGone { .. }
        )),
        m == MarkerAfter::Absent && id != Ident::NewPid,
        "{case}"
    );
    assert_eq!(
        has(v, |c| *c == Contradiction::NonceDiffers),
        m == MarkerAfter::Different,
        "{case}"
    );
    assert_eq!(
        has(v, |c| *c == Contradiction::NonceButNoPlatformRestore),
        m == MarkerAfter::Equal && p == Platform::Cold,
        "{case}"
    );
    assert_eq!(
        has(v, |c| matches!(
            c,
            Contradiction::SnapshotNameMismatch { .. }
        )),
        // Named whatever the kernel says, also when no kernel answered.
        p == Platform::RestoredOtherSnapshot,
        "{case}"
    );
    assert_eq!(
        has(v, |c| matches!(c, Contradiction::ModelChanged { .. })),
        m == MarkerAfter::Equal && md != Model::Same,
        "{case}"
    );
    assert_eq!(
        has(v, |c| matches!(c, Contradiction::NonceButPidChanged { .. })),
        m == MarkerAfter::Equal && id == Ident::NewPid,
        "{case}"
    );
    // Without a kernel after the resume, the verdict cannot be about the process.
    if m == MarkerAfter::NoKernel {
        assert_eq!(v.kind, VerdictKind::Inconclusive, "{case}");
    }
}

#[test]
fn a_pod_restored_condition_missing_after_the_wait_is_said_to_be_a_cold_start() {
    let mut p = gke_cold();
    assert_eq!(p.said()[0], "PodRestored: no such condition on the pod");
    p.pod_restored_budget_s = Some(60);
    assert_eq!(
        p.said()[0],
        "PodRestored: not written within the `pod_restored` budget (60 s from the resume): \
         evidence of a cold start"
    );
    p.pod_restored = gke_restored("snap-1").pod_restored;
    assert_eq!(
        p.said()[0],
        "PodRestored: True (RestoreSucceeded): Restored from snapshot snap-1"
    );
}

#[test]
fn a_restore_from_another_snapshot_names_the_missing_snapshot_name() {
    let p = gke_restored("snap-2");
    let found = p.pod_restored.as_ref().and_then(|c| c.message.clone());
    let c = Contradiction::SnapshotNameMismatch {
        expected: "snap-1".into(),
        found,
    };
    assert_eq!(
        c.to_string(),
        "snapshot name not in the PodRestored message: expected PodSnapshot snap-1, the \
         message says Restored from snapshot snap-2"
    );
}

/// The drill's workspaces outside its sample: the platform's word alone, and only when it
/// names the snapshot the pause made (a restore from another snapshot is not "restored").
#[test]
fn the_platform_alone_says_restored_only_from_the_expected_snapshot() {
    assert_eq!(platform_restored(&gke_restored("snap-1")), Ok(()));
    let other = platform_restored(&gke_restored("snap-0")).unwrap_err();
    assert!(
        other.starts_with("PodRestored=True (Restored from snapshot snap-0)"),
        "{other}"
    );
    let mut nothing_expected = gke_restored("snap-0");
    nothing_expected.expected_snapshot = None;
    assert_eq!(platform_restored(&nothing_expected), Ok(()));
    let cold = platform_restored(&gke_cold()).unwrap_err();
    assert!(cold.contains("no such condition"), "{cold}");
    let mut refused = gke_restored("snap-1");
    refused.pod_restored.as_mut().unwrap().status = "False".into();
    assert!(platform_restored(&refused).is_err());
    assert!(platform_restored(&PlatformEvidence::not_observed()).is_err());
}

/// A hash from a foreign server is cut at whole characters, never inside one.
#[test]
fn short_hashes_cut_at_whole_characters() {
    assert_eq!(super::short_hash("0123456789abcdef"), "0123456789ab");
    assert_eq!(super::short_hash("abc"), "abc");
    assert_eq!(super::short_hash("ééééééééééééééé"), "éééééééééééé");
}

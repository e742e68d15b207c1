//! Realistic example runs (a nightly on a GKE T4 pool, figures from the published Qwen2.5-3B
//! pause/resume measurements): run A, and run B the next night with a slower restore, a
//! verdict that changed and the capacity scenario fixed. Golden files and the fixture JSON
//! files in fixtures/reports/ are rendered from these.

use std::time::Duration;

use chrono::{DateTime, Utc};
use wsgate::platform::ledger::CleanupOutcome;
use wsgate::report::{
    CleanupEntry, GpuSample, RunReport, ScenarioReport, ScenarioStatus, StepReport, StepStatus,
    TargetInfo, TargetKind,
};
use wsgate::timeline::{Mark, Timeline};
use wsgate::verdict::{Evidence, Verdict};

/// The PodSnapshot's name (a UUID GKE makes; what `PodRestored` names) and its uid.
pub const SNAPSHOT_NAME: &str = "c2a7e915-0d3b-4f86-a1c4-7b9e5d20f8a3";
pub const SNAPSHOT_UID: &str = "3f6c1a2e-8b4d-4c7a-9e21-5d0f7b9a1c44";
pub const SNAPSHOT_BYTES: u64 = 8_912_896_000;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("fixture times are RFC 3339")
        .with_timezone(&Utc)
}

fn timeline(start: DateTime<Utc>, marks: &[(Mark, u64)], details: &[(Mark, &str)]) -> Timeline {
    let mut t = Timeline::new(start);
    for (mark, ms) in marks {
        let detail = details
            .iter()
            .find(|(m, _)| m == mark)
            .map(|(_, d)| d.to_string());
        t.push(
            *mark,
            start + chrono::Duration::milliseconds(*ms as i64),
            Duration::from_millis(*ms),
            detail,
        );
    }
    t
}

/// Steps from feature lines; the first `passed` pass, the next one fails with `error` (if
/// any), the rest are not run.
fn steps(lines: &[&str], passed: usize, error: Option<&str>) -> Vec<StepReport> {
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let (keyword, text) = line.split_once(' ').expect("keyword and text");
            let (status, err) = match (i.cmp(&passed), error) {
                (std::cmp::Ordering::Less, _) => (StepStatus::Passed, None),
                (std::cmp::Ordering::Equal, Some(e)) => (StepStatus::Failed, Some(e.to_string())),
                (std::cmp::Ordering::Equal, None) => (StepStatus::Skipped, None),
                _ => (StepStatus::NotRun, None),
            };
            StepReport {
                keyword: keyword.into(),
                text: text.into(),
                status,
                error: err,
            }
        })
        .collect()
}

fn evidence(phase: &str, collected_at: &str, marker: bool, pid: u32) -> Evidence {
    let marker = if marker {
        serde_json::json!({"state": "present", "digest": "6b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"})
    } else {
        serde_json::json!({"state": "absent"})
    };
    let file =
        |sha: &str, size: u64| serde_json::json!({"state": "present", "sha256": sha, "size": size});
    let files = serde_json::json!({
        "inputs/prompt.txt": file("a3f1e0d2c4b5a6978877665544332211ffeeddccbbaa99887766554433221100", 412),
        "checkpoints/model.ckpt": file("0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0", 6_174_015_488u64),
        "outputs/generation.json": file("c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00", 2_048)
    });
    serde_json::from_value(serde_json::json!({
        "phase": phase,
        "collected_at": collected_at,
        "kernel_id": "7d2b9c1e-4f3a-4b8e-a6d5-0c9e8f7a6b5d",
        "kernel_listed": true,
        "kernel": {
            "kernel_id": "7d2b9c1e-4f3a-4b8e-a6d5-0c9e8f7a6b5d",
            "kernel_id_in_process": "7d2b9c1e-4f3a-4b8e-a6d5-0c9e8f7a6b5d",
            "marker": marker,
            "pid": pid,
            "process_start": {"ticks_after_boot": 1_234_567, "epoch_s": 1_772_416_843.12, "boot_id": "b7c1d2e3-f4a5-4b6c-8d7e-9f0a1b2c3d4e"},
            "hostname": "ws-nightly-7f3c-0",
            "execution_count": 6,
            "model": {"name": "qwen2.5-3b-t4", "weight_hash": "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d", "object_id": 140_234_567_890_123u64, "output_digest": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"},
            "gpu_memory_allocated": 6_291_456_000u64,
            "ticker": {"alive": true, "ticks": 212, "interval_s": 1.0, "max_gap_s": 1.02, "max_gap_wall_s": 63.4, "age_s": 212.4},
            "files": files.clone()
        },
        "files_via_server": files,
        "disk_scan": {"roots": ["/home/jovyan"], "files_scanned": 41, "bytes_scanned": 18_432_000, "skipped_unreadable": 0, "skipped_older": 12, "truncated": false, "hits": []},
        "recovery": null,
        "notes": []
    }))
    .expect("fixture evidence deserialises")
}

fn verdict(value: serde_json::Value) -> Verdict {
    serde_json::from_value(value).expect("fixture verdict deserialises")
}

const PAUSE_RESUME: &str =
    "Pausing a GPU notebook frees the GPU, and resuming brings back the running process";
const FRESH: &str = "A resume that cold-starts is reported as a fresh session, never as a restore";
const CAPACITY: &str = "Resuming while GPUs are scarce waits visibly and loses nothing";
const CLEANUP: &str = "Snapshots are cleaned up";

/// A passed pause/resume with the process restored; `slower_ms` is added to the restore.
fn restored(start: DateTime<Utc>, slower_ms: u64) -> ScenarioReport {
    let r = 262_000;
    let t = timeline(
        start,
        &[
            (Mark::WorkspaceCreated, 0),
            (Mark::WorkspaceRunning, 41_200),
            (Mark::KernelReachable, 43_900),
            (Mark::ModelLoaded, 75_300),
            (Mark::MarkerStored, 76_100),
            (Mark::PauseRequested, 80_000),
            (Mark::Checkpointing, 81_300),
            (Mark::SnapshotReady, 198_900),
            (Mark::PodGone, 200_700),
            (Mark::GpuReleased, 201_400),
            (Mark::WorkspacePaused, 202_000),
            (Mark::ResumeRequested, r),
            (Mark::PodScheduled, r + 1_900),
            (Mark::PodReady, r + 9_200 + slower_ms),
            (Mark::PodRestored, r + 10_400 + slower_ms),
            (Mark::WorkspaceResumed, r + 11_600 + slower_ms),
            (Mark::KernelReconnected, r + 12_800 + slower_ms),
            (Mark::NextCellDone, r + 14_700 + slower_ms),
        ],
        &[
            (
                Mark::PodRestored,
                "Restored from snapshot c2a7e915-0d3b-4f86-a1c4-7b9e5d20f8a3",
            ),
            (
                Mark::GpuReleased,
                "node gke-wsgate-t4-pool-1a2b: 0/1 nvidia.com/gpu in use",
            ),
        ],
    );
    let mut s = ScenarioReport::new(
        PAUSE_RESUME,
        "A paused GPU workspace resumes with its process, model and files",
    )
    .with_timeline(t);
    s.tags = vec!["nightly".into(), "gate".into(), "gpu".into()];
    s.status = ScenarioStatus::Passed;
    s.steps = steps(
        &[
            "Given a snapshot-enabled GPU workspace is Running",
            "And the kernel has loaded the model, stored a marker in memory only and written its files",
            "When the workspace is paused",
            "Then the workspace is Paused within the \"pause_to_paused\" budget",
            "And the workspace has no pod",
            "And the GPU is free again within the \"gpu_release\" budget",
            "When the workspace is resumed",
            "Then the workspace is Running within the \"resume_to_running\" budget",
            "And the verdict is \"Restored\"",
            "And a cell using the loaded model runs without reloading it",
        ],
        10,
        None,
    );
    s.duration = Some(Duration::from_millis(r + 28_300 + slower_ms));
    s.verdict = Some(verdict(serde_json::json!({
        "kind": "Restored", "process": "restored", "files": "intact", "reason": null,
        "decided_by": [
            "the nonce's digest is in kernel memory and equals the one stored before the pause",
            "PID 57 and its start time are unchanged; execution count 6 -> 7",
            "PodRestored: True (Restored): Restored from snapshot c2a7e915-0d3b-4f86-a1c4-7b9e5d20f8a3",
            "3 files read back with the same sha256 (inputs, checkpoint, outputs)"
        ],
        "contradictions": []
    })));
    s.evidence_before = Some(evidence(
        "before_pause",
        "2026-03-02T02:01:16.100Z",
        true,
        57,
    ));
    s.evidence_after = Some(evidence(
        "after_resume",
        "2026-03-02T02:04:36.400Z",
        true,
        57,
    ));
    s.snapshot_name = Some(SNAPSHOT_NAME.into());
    s.snapshot_uid = Some(SNAPSHOT_UID.into());
    s.snapshot_bytes = Some(SNAPSHOT_BYTES);
    s.log = vec![
        "2026-03-02T02:00:00.000Z created Workspace wsgate-test/ws-nightly-7f3c (kind jupyterlab-gpu-snapshots)".into(),
        "2026-03-02T02:01:20.000Z pause requested: spec.paused=true".into(),
        "2026-03-02T02:03:18.900Z PodSnapshot ws-nightly-7f3c-snap Ready (8.3 GiB)".into(),
        "2026-03-02T02:04:22.000Z resume requested: spec.paused=false".into(),
        "2026-03-02T02:04:33.600Z workspace Running; kernel reconnected over a new websocket".into(),
    ];
    s
}

fn fresh_session(start: DateTime<Utc>, inconclusive: bool) -> ScenarioReport {
    let t = timeline(
        start,
        &[
            (Mark::WorkspaceCreated, 0),
            (Mark::WorkspaceRunning, 39_800),
            (Mark::MarkerStored, 72_000),
            (Mark::PauseRequested, 75_000),
            (Mark::GpuReleased, 194_800),
            (Mark::WorkspacePaused, 195_300),
            (Mark::ResumeRequested, 240_000),
            (Mark::PodScheduled, 241_700),
            (Mark::WorkspaceResumed, 281_300),
            (Mark::KernelReconnected, 283_000),
            (Mark::RecoveryDone, 312_500),
        ],
        &[],
    );
    let mut s =
        ScenarioReport::new(FRESH, "The snapshot is deleted before the resume").with_timeline(t);
    s.tags = vec!["nightly".into()];
    s.duration = Some(Duration::from_millis(318_000));
    if inconclusive {
        s.status = ScenarioStatus::Failed;
        s.steps = steps(
            &[
                "Given a snapshot-enabled GPU workspace is Running",
                "When the workspace is paused",
                "When the workspace's snapshots are deleted",
                "And the workspace is resumed",
                "Then the workspace is Running within the \"resume_to_running\" budget",
                "And the verdict is \"FreshSession\"",
                "And the work is recovered from the files and the application checkpoint",
            ],
            5,
            Some(
                "expected verdict FreshSession, got Inconclusive: the nonce is on disk (after resume; found 1: /home/jovyan/.ipython/profile_default/history.sqlite)",
            ),
        );
        s.verdict = Some(verdict(serde_json::json!({
            "kind": "Inconclusive", "process": "fresh", "files": "intact",
            "reason": "the nonce was found on disk, so a fresh process could have read it",
            "decided_by": ["the nonce is in /home/jovyan/.ipython/profile_default/history.sqlite"],
            "contradictions": [{"kind": "nonce_on_disk", "phase": "after_resume", "paths": ["/home/jovyan/.ipython/profile_default/history.sqlite"]}]
        })));
    } else {
        s.status = ScenarioStatus::Passed;
        s.steps = steps(
            &[
                "Given a snapshot-enabled GPU workspace is Running",
                "When the workspace is paused",
                "When the workspace's snapshots are deleted",
                "And the workspace is resumed",
                "Then the workspace is Running within the \"resume_to_running\" budget",
                "And the verdict is \"FreshSession\"",
                "And the work is recovered from the files and the application checkpoint",
            ],
            7,
            None,
        );
        s.verdict = Some(verdict(serde_json::json!({
            "kind": "FreshSession", "process": "fresh", "files": "intact", "reason": null,
            "decided_by": [
                "the nonce is gone from kernel memory (marker absent)",
                "PID 57 -> 12 and a new process start time",
                "3 files read back with the same sha256"
            ],
            "contradictions": []
        })));
    }
    s.log = vec![
        "2026-03-02T02:09:30.000Z deleted PodSnapshot ws-nightly-91ab-snap before the resume"
            .into(),
    ];
    s
}

fn squeeze(start: DateTime<Utc>, fixed: bool) -> ScenarioReport {
    let mut marks = vec![
        (Mark::WorkspaceCreated, 0),
        (Mark::WorkspaceRunning, 40_400),
        (Mark::PauseRequested, 78_000),
        (Mark::GpuReleased, 199_100),
        (Mark::WorkspacePaused, 199_600),
        (Mark::ResumeRequested, 215_000),
        (Mark::WaitingForResources, 217_100),
    ];
    if fixed {
        marks.extend([
            (Mark::PodScheduled, 276_300),
            (Mark::PodRestored, 285_900),
            (Mark::WorkspaceResumed, 287_200),
        ]);
    }
    let t = timeline(
        start,
        &marks,
        &[(
            Mark::WaitingForResources,
            "PodScheduled=False Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu",
        )],
    );
    let mut s = ScenarioReport::new(
        CAPACITY,
        "A resume under a GPU squeeze waits, then restores once the squeeze is lifted",
    )
    .with_timeline(t);
    s.tags = vec!["nightly".into(), "drill".into()];
    let lines = [
        "Given a snapshot-enabled GPU workspace is Running",
        "When the workspace is paused",
        "When the GPUs are squeezed",
        "And the workspace is resumed",
        "Then the workspace shows a waiting state within the \"waiting_state\" budget",
        "And at most one restore attempt is in flight",
        "When the squeeze is lifted",
        "Then the workspace is Running within the \"resume_to_running\" budget",
        "And the verdict is \"Restored\"",
    ];
    if fixed {
        s.status = ScenarioStatus::Passed;
        s.steps = steps(&lines, lines.len(), None);
        s.duration = Some(Duration::from_millis(301_000));
        s.verdict = Some(verdict(serde_json::json!({
            "kind": "Restored", "process": "restored", "files": "intact", "reason": null,
            "decided_by": ["the nonce's digest is in kernel memory and equals the one stored before the pause"],
            "contradictions": []
        })));
    } else {
        s.status = ScenarioStatus::Failed;
        s.steps = steps(
            &lines,
            7,
            Some(
                "budget resume_to_running (300 s) ran out\nlast state: Paused, message \"waiting for resources: PodScheduled=False Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu\"",
            ),
        );
        s.duration = Some(Duration::from_millis(531_000));
    }
    s.snapshot_name = Some("5e1d9c3b-7a2f-4e68-b0d4-2c8f6a1e9b57".into());
    s.snapshot_uid = Some("9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d".into());
    s.snapshot_bytes = Some(8_884_000_000);
    s.log = vec![
        "2026-03-02T02:18:33.000Z ResourceQuota wsgate-gpu-squeeze: requests.nvidia.com/gpu=0".into(),
        "2026-03-02T02:18:35.100Z workspace shows: waiting for resources (1 restore attempt in flight)".into(),
    ];
    s
}

fn skipped() -> ScenarioReport {
    let mut s = ScenarioReport::new(
        CLEANUP,
        "After a successful resume the workspace's snapshots are gone",
    );
    s.tags = vec!["nightly".into()];
    s.status = ScenarioStatus::Skipped;
    s.steps = steps(
        &[
            "Given a snapshot-enabled GPU workspace is Running",
            "When the workspace is paused",
        ],
        0,
        None,
    );
    s.log = vec!["skipped: the target's WorkspaceKind has no PodSnapshotPolicy".into()];
    s
}

fn cleanup(leak: bool) -> Vec<CleanupEntry> {
    let entry = |scenario: &str, object: &str, outcome: CleanupOutcome| CleanupEntry {
        scenario: scenario.into(),
        object: object.into(),
        outcome,
    };
    let mut out = vec![
        entry(
            "A paused GPU workspace resumes with its process, model and files",
            "Workspace wsgate-test/ws-nightly-7f3c",
            CleanupOutcome::Deleted,
        ),
        entry(
            "A paused GPU workspace resumes with its process, model and files",
            "PodSnapshot wsgate-test/ws-nightly-7f3c-snap",
            CleanupOutcome::AlreadyGone,
        ),
        entry(
            "The snapshot is deleted before the resume",
            "Workspace wsgate-test/ws-nightly-91ab",
            CleanupOutcome::Deleted,
        ),
        entry(
            "A resume under a GPU squeeze waits, then restores once the squeeze is lifted",
            "ResourceQuota wsgate-test/wsgate-gpu-squeeze",
            CleanupOutcome::Deleted,
        ),
        entry(
            "A resume under a GPU squeeze waits, then restores once the squeeze is lifted",
            "Workspace wsgate-test/ws-nightly-c4d5",
            CleanupOutcome::Deleted,
        ),
    ];
    out.push(entry(
        "A resume under a GPU squeeze waits, then restores once the squeeze is lifted",
        "PodSnapshot wsgate-test/ws-nightly-c4d5-snap",
        if leak {
            CleanupOutcome::Leaked(
                "still present after the delete budget (60s): a finalizer may be stuck".into(),
            )
        } else {
            CleanupOutcome::Deleted
        },
    ));
    out
}

fn gpu(start: DateTime<Utc>) -> Vec<GpuSample> {
    let sample = |s: i64, node: &str, used: i64, pods: &[&str]| GpuSample {
        at: start + chrono::Duration::seconds(s),
        node: node.into(),
        accelerator: "nvidia-tesla-t4".into(),
        allocatable: 1,
        used,
        pods: pods.iter().map(|p| p.to_string()).collect(),
    };
    vec![
        sample(
            60,
            "gke-wsgate-t4-pool-1a2b",
            1,
            &["wsgate-test/ws-nightly-7f3c-0"],
        ),
        sample(60, "gke-wsgate-t4-pool-3c4d", 0, &[]),
        sample(
            1_110,
            "gke-wsgate-t4-pool-1a2b",
            1,
            &["wsgate-test/wsgate-squeeze-holder-0"],
        ),
        sample(
            1_110,
            "gke-wsgate-t4-pool-3c4d",
            1,
            &["wsgate-test/wsgate-squeeze-holder-1"],
        ),
    ]
}

fn run(run_id: &str, start: &str, b: bool) -> RunReport {
    let start = at(start);
    let mut r = RunReport::new(
        run_id,
        start,
        TargetInfo {
            kind: TargetKind::Cluster,
            server: "https://203.0.113.10".into(),
            namespace: "wsgate-test".into(),
            ..Default::default()
        },
    );
    r.profile = Some("fixtures/profiles/nightly.toml".into());
    r.finished_at = start + chrono::Duration::seconds(1_300);
    r.scenarios = vec![
        restored(start, if b { 6_900 } else { 0 }),
        fresh_session(start + chrono::Duration::seconds(330), b),
        squeeze(start + chrono::Duration::seconds(660), b),
        skipped(),
    ];
    r.cleanup = cleanup(!b);
    r.gpu_allocation = gpu(start);
    r.exit_code = 1;
    r
}

/// Run A: the restore scenario passes (resume -> Running 11.6 s), the fresh-session one
/// passes, the squeeze fails (budget ran out while waiting), one scenario skipped, and a
/// PodSnapshot leaked.
pub fn run_a() -> RunReport {
    run("r20260302-020000-a1b2", "2026-03-02T02:00:00Z", false)
}

/// Run B, the next night: restore 6.9 s slower, the fresh-session scenario Inconclusive
/// (failed), the squeeze scenario fixed, no leak.
pub fn run_b() -> RunReport {
    run("r20260303-020000-c3d4", "2026-03-03T02:00:00Z", true)
}

/// A drill: `n` resumes of one GPU workspace with spread restore times.
pub fn drill(n: usize) -> RunReport {
    let mut r = run_a();
    r.scenarios = (0..n)
        .map(|i| {
            let mut s = restored(at("2026-03-02T02:00:00Z"), (i as u64 * 7_919) % 20_000);
            s.name = format!("resume {i} of {n}");
            s
        })
        .collect();
    r
}

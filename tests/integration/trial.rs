//! The trial's own stamps: a watched pause and a watched resume say when the Workspace was
//! first seen Checkpointing, Paused and Running again, from the watch event, however late
//! the step that asks for them looks.

use std::time::Duration;

use kube::api::Api;
use wsgate::platform::crd::{Workspace, WorkspaceState};
use wsgate::platform::ledger::{self, Ledger};
use wsgate::platform::wait::{self, WaitFor};
use wsgate::platform::workspace as ws;
use wsgate::trial::Trial;

const NS: &str = wsgate::sim::server::TEST_NAMESPACE;
/// Every wait's budget (generous: a debug build on two cores).
const BUDGET: Duration = Duration::from_secs(60);
/// How long after a transition the test asks about it. The test's own watch and the
/// trial's see the same event a little apart (milliseconds, more on a loaded machine; 2 ms
/// short of 1.5 s once in a full test run), so a stamp taken when the watch saw it is at least
/// half of this before the question, and one taken when asked would be nearly none.
const LATE: Duration = Duration::from_millis(1500);

/// A wait of `BUDGET` for `what`, printing no progress.
fn quiet(what: &str) -> WaitFor {
    let mut wf = WaitFor::new("trial-test", BUDGET, what);
    wf.progress_every = None;
    wf
}

/// Waits for `state` without the trial, as an unrelated step would.
async fn reach(client: &kube::Client, name: &str, state: WorkspaceState) {
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let wf = quiet(&format!("be {state}"));
    wait::until(&api, name, &wf, ws::describe, |o| ws::is_state(o, state))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Waits for `state` through the trial, which keeps the Workspace it saw.
async fn trial_reaches(trial: &Trial, state: WorkspaceState) {
    trial
        .wait_state(&quiet(&format!("be {state}")), state)
        .await
        .unwrap();
}

/// A trial of the embedded defaults' Workspace `name`, created (its ledger is not kept:
/// the simulator goes with the test).
async fn created(client: &kube::Client, name: &str) -> Trial {
    let cfg = wsgate::config::load(&wsgate::config::LoadRequest::default())
        .expect("the embedded defaults load")
        .config;
    let labels = ledger::labels(name, chrono::Utc::now() + chrono::Duration::hours(1));
    let new = Trial::from_config(&cfg, name.into(), labels, Default::default());
    let mut ledger = Ledger::default();
    Trial::create(client, &mut ledger, new).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marks_are_stamped_when_the_watch_saw_them_not_when_asked() {
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let mut trial = created(&client, "trial-stamps").await;
    let wf = quiet("be Running");
    let unwatched = trial
        .wait_state(&wf, WorkspaceState::Running)
        .await
        .unwrap();
    assert_eq!(unwatched, None, "no watch before a watched request");

    let requested = trial.pause_watched(BUDGET).await.unwrap();
    reach(&client, "trial-stamps", WorkspaceState::Paused).await;
    tokio::time::sleep(LATE).await;
    let asked = std::time::Instant::now();
    let paused = trial
        .wait_state(&wf, WorkspaceState::Paused)
        .await
        .unwrap()
        .expect("the pause's watch saw it Paused");
    assert!(
        paused.instant > requested.instant,
        "Paused first seen at {}, the pause requested at {}",
        paused.at,
        requested.at
    );
    assert!(
        asked.duration_since(paused.instant) >= LATE / 2,
        "Paused stamped {:?} before it was asked for, not near {LATE:?} (see LATE)",
        asked.duration_since(paused.instant)
    );
    let checkpointing = trial.checkpointing().expect("it was seen Checkpointing");
    assert!(requested.instant < checkpointing.instant && checkpointing.instant <= paused.instant);

    let resumed = trial.resume_watched(BUDGET).await.unwrap();
    reach(&client, "trial-stamps", WorkspaceState::Running).await;
    tokio::time::sleep(LATE).await;
    let asked = std::time::Instant::now();
    let running = trial
        .wait_state(&wf, WorkspaceState::Running)
        .await
        .unwrap()
        .expect("the resume's watch saw it Running");
    assert!(running.instant > resumed.instant);
    assert!(
        asked.duration_since(running.instant) >= LATE / 2,
        "Running stamped {:?} before it was asked for, not near {LATE:?} (see LATE)",
        asked.duration_since(running.instant)
    );
    // The pause's watch saw Running while it checkpointed; the resume's does not reuse it.
    assert!(running.instant > paused.instant);
    sim.shutdown().await;
}

/// A trial's pause and resume start from the Workspace its last wait saw: no read before
/// the patch. After files were written (or the marker stored), or after a step that wrote to
/// the Workspace ([`Trial::forget_seen`]), they read first. Requests counted by the simulator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_pauses_and_resumes_from_what_its_last_wait_saw() {
    use std::sync::Arc;
    use wsgate::platform::attempts::AttemptWatch;
    // Activity probes every 100 s: a failed probe's status write cannot add a 409.
    let sim = crate::common::start_platform(|p| p.timing.activity_scale = 1.0).await;
    let client = sim.client().await.unwrap();
    let mut trial = created(&client, "trial-seen").await;
    let requests = || sim.api_fault_counts().requests;
    let pods = Arc::new(AttemptWatch::start(&client, NS, BUDGET).await.unwrap());

    trial_reaches(&trial, WorkspaceState::Running).await;
    let before = requests();
    trial.pause().await.unwrap();
    assert_eq!(
        requests() - before,
        2,
        "the pod list and the patch, no read"
    );
    trial_reaches(&trial, WorkspaceState::Paused).await;
    let before = requests();
    trial.resume_under(pods.clone()).await.unwrap();
    assert_eq!(requests() - before, 1, "the patch alone");

    trial_reaches(&trial, WorkspaceState::Running).await;
    trial.editor = Some(wsgate::trial::EditorFiles {
        before: Default::default(),
    });
    let before = requests();
    trial.pause().await.unwrap();
    assert_eq!(
        requests() - before,
        3,
        "after files were written: the pod list, a read, the patch"
    );
    trial_reaches(&trial, WorkspaceState::Paused).await;
    trial.forget_seen();
    let before = requests();
    trial.resume_under(pods).await.unwrap();
    assert_eq!(
        requests() - before,
        2,
        "after forget_seen: a read, then the patch"
    );
    trial_reaches(&trial, WorkspaceState::Running).await;
    assert!(sim.failure().is_none());
    sim.shutdown().await;
}

/// The stateless kind's check: files written through exec come back after a pause with the
/// same checksums (FilesKept) and one removed is named (FilesLost). A kind whose code-server
/// keeps its data outside the home volume (`XDG_DATA_HOME` under /tmp, as gke-labs'
/// codeserver Dockerfile says Kubeflow's image does) is refused before anything is written,
/// naming where the data is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vscode_workspace_keeps_its_files_and_data_outside_home_is_refused() {
    use wsgate::platform::crd::WorkspaceKind;
    use wsgate::verdict::FilesVerdictKind;
    let sim = crate::common::start_platform(|p| {
        p.runtime.kind = wsgate::sim::profile::RuntimeKind::Jupyter;
    })
    .await;
    let client = sim.client().await.unwrap();
    let cfg = wsgate::config::load(&wsgate::config::LoadRequest::default())
        .expect("the embedded defaults load")
        .config;
    let kinds: Api<WorkspaceKind> = Api::all(client.clone());
    let mut tmp_data = kinds.get("codeserver").await.unwrap();
    tmp_data.metadata = kube::api::ObjectMeta {
        name: Some("codeserver-tmp-data".into()),
        ..Default::default()
    };
    // Off the home volume, as /tmp/data-jovyan would be in a real image; here a directory of
    // this test's own, since the simulated pod's processes run on this machine.
    let off_home = tempfile::tempdir().unwrap();
    let data_home = off_home.path().join("data-jovyan").display().to_string();
    tmp_data.spec.pod_template["extraEnv"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "XDG_DATA_HOME", "value": data_home}));
    tmp_data.status = None;
    kinds.create(&Default::default(), &tmp_data).await.unwrap();
    let mut ledger = Ledger::default();
    let wf = quiet("be Running");
    let mut trials = Vec::new();
    for (name, kind) in [
        ("vscode-kept", "codeserver"),
        ("vscode-tmp", "codeserver-tmp-data"),
    ] {
        let labels = ledger::labels(name, chrono::Utc::now() + chrono::Duration::hours(1));
        let mut new = Trial::from_config(&cfg, name.into(), labels, Default::default());
        new.kind = kind.into();
        new.image_config = "codeserver-python-cpu".into();
        new.pod_config = "small_cpu".into();
        let trial = Trial::create(&client, &mut ledger, new).await.unwrap();
        trial
            .wait_state(&wf, WorkspaceState::Running)
            .await
            .unwrap();
        trials.push(trial);
    }
    let (mut kept, mut tmp) = (trials.remove(0), trials.remove(0));

    let refused = tmp.write_editor_files(&cfg, "t1").await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains(&format!("{data_home}/code-server"))
            && refused.to_string().contains("outside the home volume"),
        "{refused}"
    );
    assert_eq!(refused.exit_code(), wsgate::exit_code::USAGE);
    assert!(tmp.editor.is_none());

    let health = kept.code_server_health(&cfg).await.unwrap();
    assert_eq!(health.status, "expired");
    let written = kept.write_editor_files(&cfg, "t1").await.unwrap().clone();
    assert_eq!(written.before.len(), 3, "{written:?}");
    let pod_uid = |p: Option<k8s_openapi::api::core::v1::Pod>| p.and_then(|p| p.metadata.uid);
    let before = pod_uid(kept.current_pod().await.unwrap()).expect("a pod before the pause");
    kept.pause_watched(BUDGET).await.unwrap();
    reach(&client, "vscode-kept", WorkspaceState::Paused).await;
    kept.resume_watched(BUDGET).await.unwrap();
    reach(&client, "vscode-kept", WorkspaceState::Running).await;
    let after = pod_uid(kept.current_pod().await.unwrap()).expect("a pod after the resume");
    assert_ne!(
        before, after,
        "the resume started a new pod: nothing but files came back"
    );
    let v = kept.files_verdict(&cfg).await.unwrap();
    assert_eq!(v.kind, FilesVerdictKind::FilesKept, "{v:?}");
    let removed = kept.remove_editor_file(&cfg, "extension").await.unwrap();
    assert!(removed.ends_with("package.json"), "{removed}");
    let v = kept.files_verdict(&cfg).await.unwrap();
    assert_eq!(v.kind, FilesVerdictKind::FilesLost, "{v:?}");
    assert_eq!(v.label(), "FilesLost (extension)");
    sim.shutdown().await;
}

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
/// How long after a transition the test asks about it.
const LATE: Duration = Duration::from_millis(1500);

/// Waits for `state` without the trial, as an unrelated step would.
async fn reach(client: &kube::Client, name: &str, state: WorkspaceState) {
    let api: Api<Workspace> = Api::namespaced(client.clone(), NS);
    let mut wf = WaitFor::new("trial-test", BUDGET, format!("be {state}"));
    wf.progress_every = None;
    wait::until(&api, name, &wf, ws::describe, |o| ws::is_state(o, state))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marks_are_stamped_when_the_watch_saw_them_not_when_asked() {
    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let cfg = wsgate::config::load(&wsgate::config::LoadRequest::default())
        .expect("the embedded defaults load")
        .config;
    let labels = ledger::labels(
        "trial-stamps",
        chrono::Utc::now() + chrono::Duration::hours(1),
    );
    let new = Trial::from_config(&cfg, "trial-stamps".into(), labels, Default::default());
    let mut ledger = Ledger::default();
    let mut trial = Trial::create(&client, &mut ledger, new).await.unwrap();
    let mut wf = WaitFor::new("trial-test", BUDGET, "be Running");
    wf.progress_every = None;
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
    assert!(paused.instant > requested.instant);
    assert!(
        asked.duration_since(paused.instant) >= LATE,
        "Paused stamped {:?} before it was asked for, not at least {LATE:?}",
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
    assert!(asked.duration_since(running.instant) >= LATE);
    // The pause's watch saw Running while it checkpointed; the resume's does not reuse it.
    assert!(running.instant > paused.instant);
    sim.shutdown().await;
}

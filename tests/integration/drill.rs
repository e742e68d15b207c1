//! `wsgate drill` on the embedded simulator: N workspaces resume at once on M GPUs; every
//! one ends Restored, waits are measured, nothing is left; bad N/M are usage errors.

use crate::common::{text, wsgate};

#[test]
fn a_small_drill_restores_every_workspace_and_reports_the_waits() {
    let dir = tempfile::tempdir().unwrap();
    let reports = format!("reports.dir={}", dir.path().display());
    let o = wsgate(&[
        "drill",
        "--workspaces",
        "4",
        "--gpus",
        "1",
        "--sample",
        "1",
        "--set",
        &reports,
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("all 4 workspaces restored"), "{out}");
    let report = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("drill.json"))
        .find(|p| p.exists())
        .expect("drill.json written");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(
        results.iter().filter(|x| x["sampled"] == true).count(),
        1,
        "{r}"
    );
    for x in results {
        assert_eq!(x["max_attempts"], 1, "{x}");
        let want = if x["sampled"] == true {
            "Restored"
        } else {
            "PlatformRestored"
        };
        assert_eq!(
            x["verdict"], want,
            "never Restored on the platform's word: {x}"
        );
    }
    // One GPU for four: the last one waited for three others to be done.
    let waited: Vec<f64> = results
        .iter()
        .map(|x| x["waited"].as_f64().unwrap())
        .collect();
    let (min, max) = waited
        .iter()
        .fold((f64::MAX, 0f64), |(a, b), w| (a.min(*w), b.max(*w)));
    assert!(max > min, "{waited:?}");
    assert_eq!(r["waited"]["count"], 4);
    // GKE writes PodRestored after the pod is Ready; the simulator's default lag is 2 s,
    // and the drill records it for every workspace, from the pod watch.
    for x in results {
        let lag = x["ready_to_pod_restored"].as_f64().unwrap_or(-1.0);
        assert!((1.5..10.0).contains(&lag), "Ready -> PodRestored: {x}");
    }
    assert_eq!(r["ready_to_pod_restored"]["count"], 4, "{r}");
    assert!(out.contains("Ready -> PodRestored"), "{out}");
}

/// Runs a drill and returns its drill.json.
fn drill(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let reports = format!("reports.dir={}", dir.path().display());
    let mut all = vec!["drill", "--set", &reports];
    all.extend(args);
    let o = wsgate(&all);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("drill.json"))
        .find(|p| p.exists())
        .expect("drill.json written");
    serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap()
}

fn assert_all_restored_once(r: &serde_json::Value, n: usize, sampled: usize) {
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), n);
    assert_eq!(
        results.iter().filter(|x| x["sampled"] == true).count(),
        sampled
    );
    for x in results {
        assert_eq!(x["max_attempts"], 1, "{x}");
        let want = if x["sampled"] == true {
            "Restored"
        } else {
            "PlatformRestored"
        };
        assert_eq!(x["verdict"], want, "{x}");
        assert!(x["problem"].is_null(), "{x}");
    }
    assert_eq!(r["waited"]["count"], n);
    assert_eq!(r["to_running"]["count"], n);
}

#[test]
fn eight_workspaces_on_two_gpus_all_on_real_jupyter_servers() {
    let r = drill(&["--workspaces", "8", "--gpus", "2", "--sample", "8"]);
    assert_all_restored_once(&r, 8, 8);
    assert_capacity_held(&r, 2);
}

#[test]
fn two_hundred_workspaces_on_twenty_gpus_on_the_none_runtime() {
    let r = drill(&["--workspaces", "200", "--gpus", "20", "--sample", "2"]);
    assert_all_restored_once(&r, 200, 2);
    assert_capacity_held(&r, 20);
}

/// With M GPUs, the (M+1)-th workspace can get a GPU only after some workspace was done
/// (Running, checked and deleted): no more than M ran at once.
fn assert_capacity_held(r: &serde_json::Value, gpus: usize) {
    let sorted = |key: &str| {
        let mut v: Vec<f64> = r["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x[key].as_f64().unwrap())
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (waited, running) = (sorted("waited"), sorted("to_running"));
    assert!(
        waited[gpus] >= running[0],
        "workspace {} got a GPU after {:.3} s, before any was done ({:.3} s)",
        gpus + 1,
        waited[gpus],
        running[0]
    );
}

#[test]
fn a_drill_needs_fewer_gpus_than_workspaces() {
    for args in [
        ["--workspaces", "2", "--gpus", "2"],
        ["--workspaces", "3", "--gpus", "0"],
    ] {
        let mut all = vec!["drill"];
        all.extend(args);
        let o = wsgate(&all);
        assert_eq!(
            o.status.code(),
            Some(wsgate::exit_code::USAGE),
            "{}",
            text(&o)
        );
        assert!(text(&o).contains("a drill needs 0 < M < N"), "{}", text(&o));
    }
}

/// The pod watch behind "at most one restore attempt": with fault duplicate-restore-attempts
/// it sees the second attempt, although the add-on removes it as soon as the first is Ready.
#[tokio::test]
async fn the_attempt_watch_sees_a_duplicate_restore_attempt_that_is_cleaned_up() {
    use kube::api::Api;
    use wsgate::platform::attempts::AttemptWatch;
    use wsgate::platform::crd::{Workspace, WorkspaceState};
    use wsgate::platform::ledger::Ledger;
    use wsgate::platform::wait::{self, WaitFor};
    use wsgate::platform::workspace::{self as ws, NewWorkspace};

    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let api: Api<Workspace> = Api::namespaced(client.clone(), "wsgate-test");
    let state = |name: &'static str, s: WorkspaceState| {
        let api = api.clone();
        async move {
            let mut w = WaitFor::new("test", std::time::Duration::from_secs(60), "change");
            w.progress_every = None;
            wait::until(&api, name, &w, ws::describe, |o| ws::is_state(o, s))
                .await
                .unwrap();
        }
    };
    let mut maxima = Vec::new();
    for (name, fault) in [
        ("attempts-a", None),
        ("attempts-b", Some("duplicate-restore-attempts")),
    ] {
        let new = NewWorkspace {
            namespace: "wsgate-test".into(),
            name: name.into(),
            kind: "jupyterlab-resumable".into(),
            image_config: "jupyterlab-gpu".into(),
            pod_config: "gpu_t4_spot".into(),
            home_pvc: format!("{name}-home"),
            home_size: "1Gi".into(),
            labels: Default::default(),
            annotations: fault
                .map(|f| [("sim.wsgate.dev/fault".to_string(), f.to_string())].into())
                .unwrap_or_default(),
        };
        let mut ledger = Ledger::default();
        ws::create_home(&client, &mut ledger, &new).await.unwrap();
        let created = ws::create(&client, &mut ledger, &new).await.unwrap();
        let uid = created.metadata.uid.unwrap();
        state(name, WorkspaceState::Running).await;
        ws::set_paused(&client, "wsgate-test", name, &uid, true)
            .await
            .unwrap();
        state(name, WorkspaceState::Paused).await;
        let watch = AttemptWatch::start(&client, "wsgate-test", std::time::Duration::from_secs(10))
            .await
            .unwrap();
        watch.mark_resumed();
        ws::set_paused(&client, "wsgate-test", name, &uid, false)
            .await
            .unwrap();
        state(name, WorkspaceState::Running).await;
        maxima.push(watch.max_alive(name));
        assert!(watch.scheduled(name).is_some());
    }
    assert_eq!(
        maxima,
        vec![1, 2],
        "attempts alive at once: healthy, duplicated"
    );
}

/// A drill whose first preparations fail starts no more workspaces: with every checkpoint
/// failing, the two started at once (two GPUs) fail and the other four are never created.
/// Before, all N were queued at once and every one was created and waited for.
#[test]
fn a_drill_stops_starting_workspaces_at_its_first_failure() {
    let dir = tempfile::tempdir().unwrap();
    let profile = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sim/default.toml"),
    )
    .unwrap();
    let edited = profile
        .replace("enabled = []", "enabled = [\"checkpoint-fails\"]")
        .replace("kind = \"jupyter\"", "kind = \"none\"");
    assert_ne!(edited, profile);
    let path = dir.path().join("failing.toml");
    std::fs::write(&path, edited).unwrap();
    let sim = format!("sim.profile={}", path.display());
    let reports = format!("reports.dir={}", dir.path().join("r").display());
    let o = wsgate(&[
        "drill",
        "--workspaces",
        "6",
        "--gpus",
        "2",
        "--sample",
        "0",
        "--set",
        &sim,
        "--set",
        &reports,
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(wsgate::exit_code::FAILED), "{out}");
    assert!(out.contains("checkpoint failed: trigger"), "{out}");
    assert!(
        out.contains("had started 2 of its 6 workspaces; none was started after this failure"),
        "{out}"
    );
    // Workspace names are `wsgate-drill-<drill id>-<index>`: none past index 001 appears
    // (the run id carries the time of day, so a bare `-002` is no test).
    let indexes: Vec<&str> = out
        .split("wsgate-drill-")
        .skip(1)
        .filter_map(|rest| rest.get(7..10))
        .collect();
    assert!(!indexes.is_empty(), "{out}");
    assert!(
        indexes.iter().all(|i| *i == "000" || *i == "001"),
        "a third workspace was started ({indexes:?}): {out}"
    );
}

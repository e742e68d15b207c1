//! The `wsgate` binary as a user runs it: help, exit codes, dry-run, bad config, and the
//! target checks (no context, unreachable server, wrong token, namespace not opted in).

use crate::common::{start_platform, start_sim, text, wsgate};

#[test]
fn readme_exit_code_table_matches_the_code() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .split("## Exit codes")
        .nth(1)
        .expect("README has an exit code section");
    let codes: Vec<i32> = section
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| ")?.split(' ').next()?.parse().ok())
        .collect();
    let table: Vec<i32> = wsgate::exit_code::TABLE.iter().map(|(c, _)| *c).collect();
    assert_eq!(codes, table);
}

#[test]
fn help_lists_every_subcommand_in_one_line() {
    let o = wsgate(&["--help"]);
    assert!(o.status.success());
    let t = text(&o);
    for sub in [
        "run", "sim", "probe", "gate", "drill", "status", "doctor", "janitor", "cost", "report",
    ] {
        assert!(
            t.lines().any(|l| l.trim_start().starts_with(sub)),
            "{sub} missing in:\n{t}"
        );
    }
}

#[test]
fn dry_run_prints_the_plan_and_provenance() {
    let o = wsgate(&[
        "run",
        "--dry-run",
        "--keep",
        "failed",
        "--set",
        "budgets.resume_to_running=90",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("embedded simulator"), "{t}");
    assert!(t.contains("--keep"), "provenance of keep:\n{t}");
    assert!(t.contains("90"), "{t}");
}

#[test]
fn bad_config_is_a_usage_error_naming_the_key() {
    let o = wsgate(&["run", "--dry-run", "--set", "budgets.no_such_budget=3"]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("no_such_budget"));
    let o = wsgate(&["run", "--dry-run", "--set", "budgets.cell=-1"]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&o)
    );
    let o = wsgate(&["run", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(wsgate::exit_code::USAGE));
}

#[test]
fn cluster_target_without_a_named_context_is_refused() {
    let o = wsgate(&["run", "--target", "cluster"]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::TARGET),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("--context"), "{}", text(&o));
}

#[test]
fn unreachable_cluster_and_bad_kubeconfig_exit_with_target_code() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .unwrap();
    let o = wsgate(&[
        "run",
        "--target",
        "cluster",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--set",
        "target.insecure_skip_tls_verify=true",
    ]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::TARGET),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("unreachable"), "{}", text(&o));
    std::fs::write(&kc, "this: [is not a kubeconfig").unwrap();
    let o = wsgate(&[
        "run",
        "--target",
        "cluster",
        "--kubeconfig",
        kc.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::TARGET),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains("panicked"));
}

#[tokio::test]
async fn wrong_token_and_namespace_without_opt_in_are_refused() {
    // With the platform: an opted-in run checks the kind's options before the suite.
    let sim = start_platform(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let kc_s = kc.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        wsgate(&[
            "run",
            "--target",
            "cluster",
            "--kubeconfig",
            &kc_s,
            "--namespace",
            "default",
        ])
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(wsgate::exit_code::TARGET),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("wsgate.dev/test-namespace=true"),
        "{}",
        text(&out)
    );

    // The opted-in namespace passes the checks; a tag no scenario has selects nothing to run.
    let opted = kc.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        wsgate(&[
            "run",
            "--target",
            "cluster",
            "--kubeconfig",
            &opted,
            "--tags",
            "@no-such-tag",
        ])
    })
    .await
    .unwrap();
    // Opted in, so the run goes on; the tag selects nothing, and a run of nothing fails.
    assert!(text(&out).contains("is opted in"), "{}", text(&out));
    assert_eq!(
        out.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("no scenario matched (tags: @no-such-tag"),
        "{}",
        text(&out)
    );

    std::fs::write(
        &kc,
        sim.kubeconfig_yaml().replace(sim.token(), "expired-token"),
    )
    .unwrap();
    let kc_s = kc.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        wsgate(&["run", "--target", "cluster", "--kubeconfig", &kc_s])
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(wsgate::exit_code::TARGET),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("refused the credentials"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains(sim.token()), "no secret in output");
}

#[tokio::test]
async fn status_lists_workspaces_in_plain_words() {
    use kube::api::{Api, PostParams};
    let sim = start_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let api: Api<wsgate::platform::crd::Workspace> =
        Api::namespaced(sim.client().await.unwrap(), "wsgate-test");
    let w = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Workspace", "metadata": {"name": "nb-1"},
        "spec": {"kind": "k", "podTemplate": {"options": {"imageConfig": "i", "podConfig": "p"}}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &w).await.unwrap();
    api.patch_status(
        "nb-1",
        &Default::default(),
        &kube::api::Patch::Merge(serde_json::json!({"status": {"state": "Paused", "stateMessage": "Workspace is paused"}})),
    )
    .await
    .unwrap();
    let kc_s = kc.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        wsgate(&["status", "--target", "cluster", "--kubeconfig", &kc_s])
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("nb-1") && t.contains("Paused") && t.contains("fresh session"),
        "{t}"
    );
    let out = wsgate(&["status"]);
    assert_eq!(
        out.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&out)
    );
}

#[tokio::test]
async fn sim_serves_its_kubeconfig_with_the_profile_given_and_stops_cleanly_on_sigterm() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    // A profile that does not exist is named, exit 2, before anything listens.
    let o = wsgate(
        &[
            "sim",
            "--sim-profile",
            "/nonexistent/sim.toml",
            "--kubeconfig",
        ]
        .into_iter()
        .chain([kc.to_str().unwrap()])
        .collect::<Vec<_>>(),
    );
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("/nonexistent/sim.toml"), "{}", text(&o));
    assert!(!kc.exists());
    // A profile of one's own: four GPU nodes instead of the default two.
    let default = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sim/default.toml"),
    )
    .unwrap();
    let four = default.replacen("count = 2", "count = 4", 1);
    assert_ne!(four, default);
    let profile = dir.path().join("four-gpus.toml");
    std::fs::write(&profile, four).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_wsgate"))
        .args(["sim", "--kubeconfig", kc.to_str().unwrap(), "--sim-profile"])
        .arg(&profile)
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !kc.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no kubeconfig within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let yaml = std::fs::read_to_string(&kc).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&yaml).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    assert!(
        config
            .cluster_url
            .to_string()
            .starts_with("https://127.0.0.1:"),
        "loopback only"
    );
    let client = kube::Client::try_from(config).unwrap();
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    assert_eq!(
        nodes.list(&Default::default()).await.unwrap().items.len(),
        5,
        "the profile's nodes: four GPU nodes and one CPU node"
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = tokio::task::spawn_blocking(move || {
        crate::common::wait_within(child, 60, "wsgate sim after SIGTERM")
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", out.status);
}

#[test]
fn doctor_checks_the_embedded_simulator_and_passes() {
    let o = wsgate(&["doctor"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    for check in [
        "Workspace CRDs",
        "Pod Snapshot CRDs",
        "snapshot add-on",
        "snapshot storage",
        "WorkspaceKind jupyterlab-resumable",
        "add-on tenant namespaces",
        "network policies",
        "GPU node pool",
        "namespace wsgate-test",
        "RBAC of the current identity",
        "port-forward (session.connect)",
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(check) && l.contains(" ok ")),
            "{check} not ok:\n{out}"
        );
    }
}

#[test]
fn doctor_names_what_is_missing_and_how_to_fix_it() {
    let o = wsgate(&[
        "doctor",
        "--set",
        "workspace.pod_config=gpu_a100",
        "--set",
        "workspace.kind=jupyterlab",
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(wsgate::exit_code::TARGET), "{out}");
    assert!(out.contains("WorkspaceKind jupyterlab"), "{out}");
    assert!(out.contains("pause will not snapshot"), "{out}");
    assert!(
        out.contains("podConfig \"gpu_a100\" is not an option of WorkspaceKind jupyterlab"),
        "{out}"
    );
    assert!(out.contains("fix: fix the WorkspaceKind"), "{out}");
}

#[test]
fn doctor_fails_on_a_broken_simulator_profile_and_says_how_to_fix_it() {
    // A cluster whose GPU pool was scaled to zero.
    let dir = tempfile::tempdir().unwrap();
    let profile = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/sim/default.toml"
    ))
    .unwrap();
    assert!(profile.contains("count = 2\n"));
    let broken = dir.path().join("no-gpus.toml");
    std::fs::write(&broken, profile.replacen("count = 2\n", "count = 0\n", 1)).unwrap();
    let o = wsgate(&[
        "doctor",
        "--set",
        &format!("sim.profile={}", broken.display()),
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(wsgate::exit_code::TARGET), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("GPU node pool") && l.contains("FAIL")),
        "{out}"
    );
    assert!(out.contains("fix: add a GPU node pool"), "{out}");
    assert!(out.contains("1 check(s) failed"), "{out}");
}

#[tokio::test]
async fn a_kubeconfig_that_skips_tls_verification_is_refused_unless_wsgate_is_told() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    let yaml: String = sim
        .kubeconfig_yaml()
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("certificate-authority-data:") {
                "    insecure-skip-tls-verify: true".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(yaml.contains("insecure-skip-tls-verify: true"), "{yaml}");
    std::fs::write(&kc, yaml).unwrap();
    let kc_s = kc.to_str().unwrap().to_string();
    let run = |extra: &'static [&'static str]| {
        let kc_s = kc_s.clone();
        tokio::task::spawn_blocking(move || {
            let mut args = vec![
                "run",
                "--target",
                "cluster",
                "--kubeconfig",
                kc_s.as_str(),
                "--tags",
                "@no-such-tag",
            ];
            args.extend_from_slice(extra);
            wsgate(&args)
        })
    };
    let out = run(&[]).await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(wsgate::exit_code::TARGET),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("turns TLS verification of the API server off"),
        "{}",
        text(&out)
    );
    // Told explicitly, it goes on, and says so loudly.
    let out = run(&["--set", "target.insecure_skip_tls_verify=true"])
        .await
        .unwrap();
    assert!(
        text(&out).contains("WARNING: TLS verification of the API server is turned off"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("is opted in"), "{}", text(&out));
}

/// Output that cannot be written and environments that are not text end with a documented
/// code and one line, never a panic (exit 101).
#[test]
fn a_closed_pipe_a_full_disk_and_non_utf8_variables_are_not_panics() {
    let bin = env!("CARGO_BIN_EXE_wsgate");
    let bash = |script: &str| {
        std::process::Command::new("timeout")
            .args(["60", "bash", "-c", script])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env_remove("KUBECONFIG")
            .output()
            .expect("bash runs")
    };
    // `true` exits at once, so the dry run's first write meets a closed pipe.
    let o = bash(&format!(
        "'{bin}' run --dry-run | true; echo \"code=${{PIPESTATUS[0]}}\""
    ));
    let out = text(&o);
    assert!(
        out.contains(&format!("code={}", wsgate::exit_code::PIPE_CLOSED)),
        "{out}"
    );
    assert!(!out.contains("panicked"), "{out}");
    // The readers of a report too: `report`, `report --compare` and `cost` piped into a
    // reader that stops at once (`true`, as `head -1` would after one line).
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let json = wsgate::report::json::to_json(&crate::report::fixture::run_a()).unwrap();
    std::fs::write(&report, json).unwrap();
    let r = report.display();
    for args in [
        format!("report '{r}'"),
        format!("report --compare '{r}' '{r}'"),
        format!("cost '{r}'"),
    ] {
        let o = bash(&format!(
            "'{bin}' {args} | true; echo \"code=${{PIPESTATUS[0]}}\""
        ));
        let out = text(&o);
        assert!(
            out.contains(&format!("code={}", wsgate::exit_code::PIPE_CLOSED)),
            "{args}: {out}"
        );
        assert!(!out.contains("panicked"), "{args}: {out}");
    }
    let o = bash(&format!("'{bin}' run --dry-run > /dev/full"));
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::OUTPUT),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("cannot write to standard output"),
        "{}",
        text(&o)
    );
    let o = bash(&format!("FOO=$'\\xff' '{bin}' run --dry-run"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = bash(&format!(
        "WSGATE_BUDGETS__DELETE=$'\\xff' '{bin}' run --dry-run"
    ));
    assert_eq!(
        o.status.code(),
        Some(wsgate::exit_code::USAGE),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("WSGATE_BUDGETS__DELETE` is not valid UTF-8"),
        "{}",
        text(&o)
    );
}

/// The options are checked against the kind before anything is created: a GPU image on a
/// CPU pod option is refused with the kind's filterRule message (exit 2), and options left
/// empty are picked from the kind, saying which.
#[test]
fn options_the_kind_refuses_stop_the_run_and_empty_ones_are_picked() {
    let o = wsgate(&["run", "--set", "workspace.pod_config=small_cpu"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(wsgate::exit_code::USAGE), "{out}");
    assert!(
        out.contains(
            "not allowed: pod config option \"small_cpu\" is restricted: A GPU image requires a GPU pod."
        ),
        "{out}"
    );
    assert!(
        out.contains("Kubeflow's workspaces backend refuses this pair"),
        "{out}"
    );
    assert!(!out.contains("Running"), "nothing was created: {out}");
    let o = wsgate(&[
        "run",
        "--set",
        "workspace.image_config=",
        "--set",
        "workspace.pod_config=",
        "--tags",
        "@no-such-tag",
    ]);
    let out = text(&o);
    assert!(
        out.contains(
            "workspace options picked from WorkspaceKind jupyterlab-resumable: podConfig \
             \"gpu_t4_spot\" (its first GPU option), imageConfig \"jupyterlab-gpu\""
        ),
        "{out}"
    );
    assert_eq!(o.status.code(), Some(wsgate::exit_code::USAGE), "{out}");
}

/// The field report's lag (PodRestored 17 s after the restored pod is Ready, far longer than
/// the harness needs to reach the kernel) leaves the verdict Restored: the harness waits for
/// the condition instead of reading it once, and records the lag as a phase.
#[test]
fn a_pod_restored_lag_of_17_s_leaves_the_verdict_restored() {
    let dir = tempfile::tempdir().unwrap();
    let reports = format!("reports.dir={}", dir.path().display());
    let o = wsgate(&[
        "run",
        "--name",
        "A paused GPU workspace resumes with its process, model and files",
        "--set",
        "sim.profile=fixtures/sim/field-restore-lag.toml",
        "--set",
        &reports,
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    // The servers are tokenless, as Kubeflow's images run them: said once, when the first
    // one starts.
    assert_eq!(
        out.matches(wsgate::sim::pods::TOKENLESS_NOTICE).count(),
        1,
        "{out}"
    );
    let report = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("report.json"))
        .find(|p| p.exists())
        .expect("report.json written");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    let s = &r["scenarios"][0];
    assert_eq!(s["verdict"]["kind"], "Restored", "{s}");
    let phase = |name: &str| {
        s["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["duration"].as_f64())
    };
    let lag = phase("ready_to_pod_restored").expect("the lag is a phase");
    // The simulator writes it 17 s after it marked the pod Ready; the harness sees both
    // through a watch, each a few milliseconds late (16,997 ms was seen).
    assert!(
        (16_500.0..40_000.0).contains(&lag),
        "Ready -> PodRestored {lag} ms"
    );
    // The kernel answered well before the condition came.
    let kernel = phase("resume_to_kernel").expect("resume -> kernel");
    let restored = phase("resume_to_pod_restored").expect("resume -> PodRestored");
    assert!(
        kernel < restored,
        "kernel {kernel} ms, PodRestored {restored} ms"
    );
    // Checkpointing and the resumed pod's binding are stamped from the watch events that
    // showed them, so they come before what follows them.
    let checkpointing = phase("pause_to_checkpointing").expect("pause -> Checkpointing");
    let paused = phase("pause_to_paused").expect("pause -> Paused");
    assert!(
        checkpointing < paused,
        "Checkpointing {checkpointing} ms, Paused {paused} ms"
    );
    let scheduled = phase("resume_to_scheduled").expect("resume -> pod bound");
    let running = phase("resume_to_running").expect("resume -> Running");
    assert!(
        scheduled <= running,
        "bound {scheduled} ms, Running {running} ms"
    );
}

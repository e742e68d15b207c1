//! Bad input as a hostile or careless user gives it: every case ends with a documented exit
//! code and a message that says what to do, never a panic (101) or a hang. Each command
//! runs under `timeout`, so a hang fails the test instead of stalling it.

use std::process::Output;

use crate::common::text;

/// `wsgate ARGS` with `env`, killed after `secs` (exit 124 then).
fn wsgate_within(secs: u32, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = crate::common::within(secs.into(), env!("CARGO_BIN_EXE_wsgate"));
    c.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("timeout and wsgate run")
}

fn assert_code(o: &Output, code: i32, says: &str) {
    let out = text(o);
    assert_eq!(o.status.code(), Some(code), "{out}");
    assert!(out.contains(says), "expected {says:?} in:\n{out}");
    assert!(!out.contains("panicked"), "{out}");
}

#[test]
fn an_api_server_that_never_answers_is_named_within_the_response_timeout() {
    let port = crate::common::silent_server();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster: {{server: \"https://127.0.0.1:{port}\"}}\n  name: c\ncontexts:\n- context: {{cluster: c, user: u}}\n  name: c\ncurrent-context: c\nusers:\n- name: u\n  user: {{token: t}}\n"
        ),
    )
    .unwrap();
    let kc = kc.display().to_string();
    let started = std::time::Instant::now();
    let o = wsgate_within(
        30,
        &["status", "--target", "cluster", "--kubeconfig", &kc],
        &[("WSGATE_API__RESPONSE_TIMEOUT", "2")],
    );
    assert_code(&o, wsgate::exit_code::TARGET, "api.response_timeout");
    // Within its 2 s budget and a margin for a loaded machine, not the 30 s kill.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_jupyter_url_that_never_answers_ends_within_the_connect_budget() {
    let port = crate::common::silent_server();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("probe.json").display().to_string();
    let url = format!("http://127.0.0.1:{port}/");
    let started = std::time::Instant::now();
    let o = wsgate_within(
        30,
        &[
            "probe",
            "mark",
            "--url",
            &url,
            "--state",
            &state,
            "--connect-budget",
            "2s",
        ],
        &[],
    );
    assert_code(&o, wsgate::exit_code::TARGET, "timed out");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn numbers_and_dates_out_of_range_are_refused_with_the_range() {
    let o = wsgate_within(
        30,
        &["drill", "--workspaces", "99999999999", "--gpus", "2"],
        &[],
    );
    assert_code(
        &o,
        wsgate::exit_code::USAGE,
        "the most one drill takes (5000)",
    );
    let o = wsgate_within(
        30,
        &["gate", "prepare", "--expires-in-hours", "4294967295"],
        &[],
    );
    assert_code(&o, wsgate::exit_code::USAGE, "not in 1..=8760");
    let o = wsgate_within(
        30,
        &[
            "cost",
            "fixtures/reports/nightly-a.json",
            "--idle-periods",
            "99999999999999999h",
        ],
        &[],
    );
    assert_code(&o, wsgate::exit_code::USAGE, "up to 100 years");
    for seed in ["-1", "9223372036854775808"] {
        let set = format!("sim.seed={seed}");
        let o = wsgate_within(30, &["run", "--dry-run", "--set", &set], &[]);
        assert_code(
            &o,
            wsgate::exit_code::USAGE,
            "an integer from 0 to 9223372036854775807",
        );
    }
}

#[test]
fn reports_with_durations_out_of_range_are_refused_by_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/reports/nightly-a.json"),
    )
    .unwrap();
    let mut report: serde_json::Value = serde_json::from_str(&good).unwrap();
    assert!(
        report["scenarios"][0]["phases"][0]["duration"].is_number(),
        "the fixture has a phase"
    );
    for (name, value, says) in [
        ("huge", serde_json::json!(1e308), "longer than a year"),
        ("negative", serde_json::json!(-5.0), "is negative"),
    ] {
        report["scenarios"][0]["phases"][0]["duration"] = value;
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, report.to_string()).unwrap();
        let path = path.display().to_string();
        for args in [
            vec!["report", path.as_str()],
            vec!["cost", path.as_str()],
            vec![
                "report",
                "--compare",
                "fixtures/reports/nightly-a.json",
                path.as_str(),
            ],
        ] {
            let o = wsgate_within(30, &args, &[]);
            assert_code(&o, wsgate::exit_code::USAGE, says);
            assert!(text(&o).contains("is not a wsgate JSON report"), "{args:?}");
        }
    }
}

#[test]
fn values_of_64_kib_and_more_are_read_or_refused_not_panics() {
    let long = "a".repeat(70_000);
    let o = wsgate_within(30, &["run", "--dry-run", "--name", &long], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let tag = format!("@{long}");
    let o = wsgate_within(30, &["run", "--dry-run", "--tags", &tag], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let set = format!("workspace.kind={long}");
    let o = wsgate_within(30, &["run", "--dry-run", "--set", &set], &[]);
    // Taken as it is: the dry run shows the resolved value whole.
    assert_code(&o, wsgate::exit_code::SUCCESS, &long);
}

/// A server that answers every request with a 404 page, as a web server that is not
/// Jupyter does.
#[tokio::test]
async fn unclear_cases_say_what_to_do() {
    // A kubeconfig whose CA is another server's: the certificate is named, not "unreachable".
    let a = crate::common::start_sim().await;
    let b = crate::common::start_sim().await;
    // Whatever these commands do, the cluster they were pointed at stays as it was.
    let before = world(&a);
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    a.write_kubeconfig(&kc).unwrap();
    let b64 = |pem: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(pem)
    };
    let text_kc = std::fs::read_to_string(&kc).unwrap();
    assert!(
        text_kc.contains(&b64(a.ca_pem())),
        "the kubeconfig embeds the CA"
    );
    std::fs::write(&kc, text_kc.replace(&b64(a.ca_pem()), &b64(b.ca_pem()))).unwrap();
    let kcs = kc.display().to_string();
    let o = tokio::task::spawn_blocking({
        let kcs = kcs.clone();
        move || {
            wsgate_within(
                60,
                &["status", "--target", "cluster", "--kubeconfig", &kcs],
                &[],
            )
        }
    })
    .await
    .unwrap();
    assert_code(&o, wsgate::exit_code::TARGET, "does not trust");

    // An empty kubeconfig, and a context it does not have: list what it has.
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "").unwrap();
    let empty = empty.display().to_string();
    let o = wsgate_within(
        30,
        &["status", "--target", "cluster", "--kubeconfig", &empty],
        &[],
    );
    assert_code(&o, wsgate::exit_code::TARGET, "defines no context");
    a.write_kubeconfig(&kc).unwrap();
    let o = wsgate_within(
        30,
        &[
            "status",
            "--target",
            "cluster",
            "--kubeconfig",
            &kcs,
            "--context",
            "nope",
        ],
        &[],
    );
    assert_code(
        &o,
        wsgate::exit_code::TARGET,
        "no context named \"nope\"; its contexts:",
    );

    // A kubeconfig without --target cluster would silently test the simulator instead.
    let o = wsgate_within(
        30,
        &[
            "drill",
            "--kubeconfig",
            &kcs,
            "--workspaces",
            "2",
            "--gpus",
            "1",
        ],
        &[],
    );
    assert_code(&o, wsgate::exit_code::USAGE, "add --target cluster");

    // A URL that answers HTTP but is not Jupyter.
    let url = format!("http://127.0.0.1:{}/", crate::common::not_jupyter_server());
    let state = dir.path().join("p.json").display().to_string();
    let o = wsgate_within(
        30,
        &["probe", "mark", "--url", &url, "--state", &state],
        &[],
    );
    assert_code(&o, wsgate::exit_code::TARGET, "is not a Jupyter server");

    // A simulator port in use is the caller's to change (2), not a bug in wsgate (70).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let simkc = dir.path().join("sim.yaml").display().to_string();
    let o = wsgate_within(30, &["sim", "--port", &port, "--kubeconfig", &simkc], &[]);
    assert_code(&o, wsgate::exit_code::USAGE, "choose another --port");
    // A kubeconfig the simulator cannot write is the machine's (74), not a bug (70).
    let o = wsgate_within(30, &["sim", "--kubeconfig", "/dev/full/kc.yaml"], &[]);
    assert_code(&o, wsgate::exit_code::OUTPUT, "choose another --kubeconfig");

    // Negative numbers are values out of range, not unknown flags.
    let o = wsgate_within(30, &["drill", "--gpus", "-1"], &[]);
    assert_code(&o, wsgate::exit_code::USAGE, "-1 is not in");

    // A bad --log filter and a WSGATE_PROFILE pointing nowhere are not ignored.
    let o = wsgate_within(30, &["run", "--dry-run", "--log", "wsgate=["], &[]);
    assert_code(&o, wsgate::exit_code::USAGE, "is not a tracing filter");
    let o = wsgate_within(
        30,
        &["run", "--dry-run"],
        &[("WSGATE_PROFILE", "/nowhere.toml")],
    );
    assert_code(
        &o,
        wsgate::exit_code::USAGE,
        "profile `/nowhere.toml` not found",
    );
    let changed = changes(&before, &world(&a));
    assert!(changed.is_empty(), "{changed:?}");
}

mod fuzz {
    use proptest::prelude::*;

    use super::{text, wsgate_within};

    /// Each subcommand with arguments that keep it from doing real work: a dry run, a
    /// cluster that is not there, files that do not exist. The fuzzed tokens come after.
    const BASES: &[&[&str]] = &[
        &["run", "--dry-run"],
        &["cost"],
        &["report"],
        &["report", "--compare"],
        &["sim", "calibrate", "--out", "/nonexistent/dir/profile.toml"],
        &[
            "status",
            "--target",
            "cluster",
            "--kubeconfig",
            "/nonexistent/kc",
        ],
        &[
            "janitor",
            "--target",
            "cluster",
            "--kubeconfig",
            "/nonexistent/kc",
        ],
        &[
            "doctor",
            "--target",
            "cluster",
            "--kubeconfig",
            "/nonexistent/kc",
        ],
        &[
            "drill",
            "--target",
            "cluster",
            "--kubeconfig",
            "/nonexistent/kc",
        ],
        &[
            "gate",
            "prepare",
            "--target",
            "cluster",
            "--kubeconfig",
            "/nonexistent/kc",
        ],
        &[
            "gate",
            "verify",
            "--target",
            "cluster",
            "--kubeconfig",
            "/nonexistent/kc",
        ],
        &[
            "probe",
            "mark",
            "--url",
            "http://127.0.0.1:9/",
            "--state",
            "/nonexistent/probe-state.json",
            "--connect-budget",
            "1s",
        ],
        &[
            "probe",
            "check",
            "--url",
            "http://127.0.0.1:9/",
            "--state",
            "/nonexistent/probe-state.json",
            "--connect-budget",
            "1s",
        ],
        &["--help"],
    ];

    const TOKENS: &[&str] = &[
        "--set",
        "--tags",
        "--name",
        "--profile",
        "--workspaces",
        "--gpus",
        "--sample",
        "--state",
        "--idle-periods",
        "--active-hours",
        "--expires-in-hours",
        "--run-id",
        "--namespace",
        "--concurrency",
        "--json",
        "--keep",
        "--log",
        "--reports",
        "budgets.delete=0",
        "budgets.delete=-1",
        "api.retry_attempts=99",
        "x=y",
        "=",
        "",
        " ",
        "-1",
        "0",
        "99999999999999999999",
        "1e308",
        "NaN",
        "@nightly and",
        "not",
        "fixtures/reports/nightly-a.json",
        "/dev/null",
        "/",
        "nightly",
        "1h30m",
        "-5h",
        "wsgate.dev/run-id=",
        "--",
        "-",
        "\u{1F600}",
        "a,b",
        "../../etc/passwd",
    ];

    const FIXTURE_REPORT: &str = "fixtures/reports/nightly-a.json";

    /// A copy of [`FIXTURE_REPORT`] in a directory of its own, made once per test process.
    fn report_copy() -> &'static str {
        static COPY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        COPY.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap().keep();
            let to = dir.join("nightly-a.json");
            std::fs::copy(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE_REPORT),
                &to,
            )
            .unwrap();
            to.display().to_string()
        })
    }

    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => proptest::sample::select(TOKENS).prop_map(|t| {
                // A report given to `wsgate report` is re-rendered beside itself: point at a
                // copy, so that no run writes into the source tree.
                if t == FIXTURE_REPORT { report_copy().to_string() } else { t.to_string() }
            }),
            1 => "[a-z0-9=.,@ -]{0,12}",
            1 => (1usize..70_000).prop_map(|n| "9".repeat(n)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// No argument vector makes a subcommand panic (101) or hang (killed after 20 s).
        #[test]
        fn no_argument_vector_panics_or_hangs(
            base in proptest::sample::select(BASES),
            extra in proptest::collection::vec(token(), 0..5),
        ) {
            let mut args: Vec<&str> = base.to_vec();
            args.extend(extra.iter().map(String::as_str));
            // `sim` runs until stopped, by design: its own proptest below stops it. Every
            // base here ends at once whatever follows it.
            let o = wsgate_within(20, &args, &[("WSGATE_API__RESPONSE_TIMEOUT", "2")]);
            let out = text(&o);
            prop_assert!(!out.contains("panicked"), "{args:?}: {out}");
            prop_assert_ne!(o.status.code(), Some(101), "{:?}: {}", args, out);
            prop_assert_ne!(o.status.code(), Some(124), "{:?} hung: {}", args, out);
            // 137: it ignored the SIGTERM for 10 s and was killed; None: a signal ended it.
            prop_assert_ne!(o.status.code(), Some(137), "{:?} hung past SIGTERM: {}", args, out);
            prop_assert!(o.status.code().is_some(), "{:?} ended by a signal: {}", args, out);
        }
    }

    /// What `sim` is given after `--kubeconfig` (never `--prepare-runtime`, which installs
    /// the Python runtime, and never another `--kubeconfig`, which could write anywhere).
    const SIM_TOKENS: &[&str] = &[
        "--port",
        "0",
        "-1",
        "70000",
        "--sim-profile",
        "default",
        "api-trouble",
        "field-restore-lag",
        "no-such-profile",
        "/nonexistent/profile.toml",
        "--help",
        "--",
    ];

    fn sim_token() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => proptest::sample::select(SIM_TOKENS).prop_map(str::to_string),
            1 => "[a-z0-9=.,@ -]{0,12}",
        ]
    }

    /// Runs `wsgate sim --kubeconfig TMP ARGS`: it either ends at once (bad arguments) or
    /// says it is listening, and then ends with 0 on SIGTERM; within 20 s either way.
    fn sim_once(extra: &[String]) -> Result<(), String> {
        use std::time::{Duration, Instant};
        let dir = tempfile::tempdir().unwrap();
        let out_path = dir.path().join("out.txt");
        let out = std::fs::File::create(&out_path).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wsgate"))
            .arg("sim")
            .arg("--kubeconfig")
            .arg(dir.path().join("kc.yaml"))
            .args(extra)
            .current_dir(dir.path())
            .env_remove("KUBECONFIG")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let said = || std::fs::read_to_string(&out_path).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut termed = false;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let text = said();
                let documented = status.code().is_some_and(|c| {
                    c != 101 && wsgate::exit_code::TABLE.iter().any(|(d, _)| *d == c)
                });
                if text.contains("panicked") || !documented {
                    return Err(format!("{status}: {text}"));
                }
                if termed && status.code() != Some(0) {
                    return Err(format!("SIGTERM ended it with {status}: {text}"));
                }
                return Ok(());
            }
            if !termed && said().contains("stop with Ctrl-C") {
                // SAFETY: kill(2) on our own child's pid; no memory is touched.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                termed = true;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("still running after 20 s: {}", said()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

        /// `sim`, which runs until stopped, with fuzzed arguments: it refuses bad ones at
        /// once with a documented code, or serves and stops cleanly on SIGTERM; never a
        /// panic, never a hang.
        #[test]
        fn sim_with_any_arguments_ends_or_stops_on_sigterm(
            extra in proptest::collection::vec(sim_token(), 0..4),
        ) {
            let outcome = sim_once(&extra);
            prop_assert!(outcome.is_ok(), "sim {:?}: {}", extra, outcome.unwrap_err());
        }
    }
}

/// Every object the simulator stores, as `Kind namespace/name` -> `uid rv N`: a change to
/// any object, its removal or a new one shows as a difference.
fn world(sim: &wsgate::sim::SimHandle) -> std::collections::BTreeMap<String, String> {
    let mut all = std::collections::BTreeMap::new();
    for kind in wsgate::sim::kinds::KINDS {
        for o in sim.store().all(kind, None) {
            let md = &o["metadata"];
            let s = |k: &str| md[k].as_str().unwrap_or("").to_string();
            all.insert(
                format!("{} {}/{}", kind.kind, s("namespace"), s("name")),
                format!("{} rv {}", s("uid"), s("resourceVersion")),
            );
        }
    }
    all
}

/// What changed between two [`world`]s, one line per object.
fn changes(
    before: &std::collections::BTreeMap<String, String>,
    after: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in before {
        match after.get(k) {
            None => out.push(format!("gone: {k}")),
            Some(w) if w != v => out.push(format!("changed: {k} ({v} -> {w})")),
            Some(_) => {}
        }
    }
    for k in after.keys().filter(|k| !before.contains_key(*k)) {
        out.push(format!("new: {k}"));
    }
    out
}

/// One bad input against a shared cluster: what it runs, with what, and what it must say.
struct Case {
    what: &'static str,
    args: Vec<String>,
    env: Vec<(String, std::ffi::OsString)>,
    cwd: Option<std::path::PathBuf>,
    code: i32,
    says: &'static str,
}

/// The simulator as a shared cluster with other people's objects in it (a Secret and a
/// ResourceQuota of the names wsgate uses, a Workspace, objects carrying wsgate's labels
/// with an empty or another run's id, one in a namespace that is not opted in): each bad
/// input ends with its documented code and message, and afterwards every object is
/// exactly as it was (same uid, same resourceVersion), none is gone and none is new.
#[tokio::test]
async fn bad_input_against_a_shared_cluster_changes_nothing() {
    use k8s_openapi::api::core::v1::{ResourceQuota, Secret};
    use kube::api::{Api, PostParams};
    use serde_json::json;
    use std::os::unix::ffi::OsStringExt;
    use wsgate::exit_code::{FAILED, TARGET, USAGE};
    use wsgate::platform::crd::Workspace;

    let sim = crate::common::start_platform(|_| {}).await;
    let client = sim.client().await.unwrap();
    let pp = PostParams::default();
    let ns = "wsgate-test";
    let ours = |run: &str| {
        json!({"app.kubernetes.io/managed-by": "wsgate", "wsgate.dev/run-id": run,
               "wsgate.dev/expires": "1"})
    };
    let secret = |name: &str, labels: serde_json::Value| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels},
            "stringData": {"token": "theirs"}}))
        .unwrap()
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    for (name, labels) in [
        ("jupyter-token", json!({"team": "ml"})),
        ("empty-run", ours("")),
        ("another-run", ours("r-another")),
    ] {
        secrets.create(&pp, &secret(name, labels)).await.unwrap();
    }
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&pp, &secret("outside", ours("r1")))
        .await
        .unwrap();
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "wsgate-gpu-squeeze"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "5"}}
    }))
    .unwrap();
    Api::<ResourceQuota>::namespaced(client.clone(), ns)
        .create(&pp, &quota)
        .await
        .unwrap();
    // Paused from the start: no pod, so nothing but a client's write changes it.
    let theirs: Workspace = serde_json::from_value(json!({
        "metadata": {"name": "theirs", "labels": {"team": "ml"}},
        "spec": {"paused": true, "kind": "jupyterlab-resumable", "podTemplate": {
            "volumes": {"home": "theirs-home"},
            "options": {"imageConfig": "jupyterlab-cpu", "podConfig": "small_cpu"}}}
    }))
    .unwrap();
    Api::<Workspace>::namespaced(client.clone(), ns)
        .create(&pp, &theirs)
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let kc = path("kc.yaml");
    sim.write_kubeconfig(std::path::Path::new(&kc)).unwrap();
    let wrong_token = path("wrong-token.yaml");
    let kc_text = std::fs::read_to_string(&kc).unwrap();
    let token = sim.token().to_string();
    assert!(kc_text.contains(&token), "the kubeconfig carries the token");
    std::fs::write(&wrong_token, kc_text.replace(&token, "not-the-token")).unwrap();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let unreachable = path("unreachable.yaml");
    std::fs::write(
        &unreachable,
        kc_text.replace(&sim.url(), &format!("https://127.0.0.1:{closed}")),
    )
    .unwrap();
    let features = dir.path().join("bad-features");
    std::fs::create_dir_all(features.join("features")).unwrap();
    std::fs::write(
        features.join("features/bad.feature"),
        "Feature: bad\n  Scenario: s\n    Given a step nobody defined\n  }}}{{{\n",
    )
    .unwrap();
    let profile = path("profile.toml");
    std::fs::write(&profile, "[workspace]\nno_such_key = 1\n").unwrap();
    let state = path("state.json");
    std::fs::write(
        &state,
        json!({"ledger": {"entries": [{"group": "", "version": "v1", "kind": "Secret",
            "plural": "secrets", "namespace": ns, "name": "jupyter-token", "uid": null}]}})
        .to_string(),
    )
    .unwrap();
    let reports = format!("reports.dir={}", path("reports"));

    let cluster = |args: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let at = if v[0] == "gate" { 2 } else { 1 };
        v.splice(
            at..at,
            ["--target", "cluster", "--kubeconfig", &kc]
                .iter()
                .map(|s| s.to_string()),
        );
        v
    };
    let case = |what, args: Vec<String>, code, says| Case {
        what,
        args,
        env: Vec::new(),
        cwd: None,
        code,
        says,
    };
    let huge = "a".repeat(70_000);
    let mut cases = vec![
        case(
            "an unknown config key",
            cluster(&["run", "--set", "nope.key=1"]),
            USAGE,
            "unknown key `nope.key`",
        ),
        case(
            "a profile with a key that does not exist",
            cluster(&["run", "--profile", &profile]),
            USAGE,
            "no_such_key",
        ),
        case(
            "a value of 70,000 characters",
            cluster(&["run", "--set", &format!("run.tags={huge}")]),
            USAGE,
            "not a tag expression",
        ),
        case(
            "a namespace without the opt-in label (run)",
            cluster(&["run", "-n", "default", "--set", &reports]),
            TARGET,
            "is not opted in",
        ),
        case(
            "a namespace without the opt-in label (janitor)",
            cluster(&["janitor", "-n", "default"]),
            TARGET,
            "is not opted in",
        ),
        case(
            "an empty janitor run id",
            cluster(&["janitor", "--run-id", ""]),
            USAGE,
            "a run id cannot be empty",
        ),
        case(
            "a blank janitor run id",
            cluster(&["janitor", "--run-id", " "]),
            USAGE,
            "is not a valid run id",
        ),
        case(
            "a janitor run id that is a selector",
            cluster(&["janitor", "--run-id", "r1,team=ml"]),
            USAGE,
            "is not a valid run id",
        ),
        case(
            "a drill of 99,999,999,999 workspaces",
            cluster(&["drill", "--workspaces", "99999999999", "--gpus", "1"]),
            USAGE,
            "above the most one drill takes",
        ),
        case(
            "a drill of 1,000,000 workspaces",
            cluster(&["drill", "--workspaces", "1000000", "--gpus", "1"]),
            USAGE,
            "above the most one drill takes",
        ),
        case(
            "negative GPUs",
            cluster(&["drill", "--gpus", "-1"]),
            USAGE,
            "-1 is not in",
        ),
        case(
            "a drill next to someone else's token Secret and squeeze quota",
            cluster(&[
                "drill",
                "-n",
                ns,
                "--workspaces",
                "2",
                "--gpus",
                "1",
                "--sample",
                "0",
                "--set",
                &reports,
            ]),
            FAILED,
            "Secret wsgate-test/jupyter-token is not wsgate's to touch",
        ),
        case(
            "an expiry past the calendar",
            cluster(&[
                "gate",
                "prepare",
                "--state",
                &path("never.json"),
                "--expires-in-hours",
                "4294967295",
            ]),
            USAGE,
            "is not in 1..=8760",
        ),
        case(
            "a state file that is not one, its ledger naming someone's Secret",
            cluster(&["gate", "verify", "--state", &state]),
            USAGE,
            "is not a wsgate gate state",
        ),
        case(
            "a context the kubeconfig lacks",
            cluster(&["status", "--context", "nope"]),
            TARGET,
            "no context named \"nope\"",
        ),
        case(
            "a wrong token",
            vec![
                "status".into(),
                "--target".into(),
                "cluster".into(),
                "--kubeconfig".into(),
                wrong_token.clone(),
            ],
            TARGET,
            "refused the credentials (401)",
        ),
        case(
            "an unreachable cluster",
            vec![
                "janitor".into(),
                "--target".into(),
                "cluster".into(),
                "--kubeconfig".into(),
                unreachable.clone(),
            ],
            TARGET,
            "127.0.0.1",
        ),
    ];
    let mut features_case = case(
        "a malformed feature file with an unknown step",
        cluster(&["run", "--features", "features", "--set", &reports]),
        USAGE,
        "features/bad.feature",
    );
    features_case.cwd = Some(features);
    cases.push(features_case);
    let mut env_case = case(
        "a WSGATE_ variable that is not UTF-8",
        cluster(&["janitor"]),
        USAGE,
        "WSGATE_LOG",
    );
    env_case.env = vec![(
        "WSGATE_LOG".into(),
        std::ffi::OsString::from_vec(vec![0xff, 0xfe]),
    )];
    cases.push(env_case);

    // The platform's controllers answer the objects above (the Workspace gets its
    // StatefulSet, Service and policy): the picture is taken once they are done.
    let mut before = world(&sim);
    let settle = std::time::Instant::now();
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(700)).await;
        let now = world(&sim);
        if now == before {
            break;
        }
        assert!(
            settle.elapsed() < std::time::Duration::from_secs(30),
            "the simulator did not settle within 30 s: {:?}",
            changes(&before, &now)
        );
        before = now;
    }
    for c in cases {
        let o = tokio::task::spawn_blocking(move || {
            let mut cmd = crate::common::within(120, env!("CARGO_BIN_EXE_wsgate"));
            cmd.args(&c.args)
                .current_dir(c.cwd.unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
                .env_remove("KUBECONFIG")
                .env_remove("KUBERNETES_SERVICE_HOST")
                .env_remove("GITHUB_STEP_SUMMARY")
                .env_remove("WSGATE_LOG");
            for (k, v) in &c.env {
                cmd.env(k, v);
            }
            let o = cmd.output().expect("timeout and wsgate run");
            (c.what, c.code, c.says, o)
        })
        .await
        .unwrap();
        let (what, code, says, o) = o;
        let out = text(&o);
        assert_eq!(o.status.code(), Some(code), "{what}:\n{out}");
        assert!(out.contains(says), "{what}: expected {says:?} in:\n{out}");
        assert!(!out.contains("panicked"), "{what}:\n{out}");
        let after = world(&sim);
        let changed = changes(&before, &after);
        assert!(
            changed.is_empty(),
            "{what} changed the cluster:\n{}",
            changed.join("\n")
        );
    }
}

/// `script` run by bash under `timeout` (`secs`), off the async test's thread.
async fn bash_within(secs: u64, script: String) -> Output {
    tokio::task::spawn_blocking(move || {
        crate::common::within(secs, "bash")
            .args(["-c", &script])
            .output()
            .expect("bash runs")
    })
    .await
    .unwrap()
}

/// A command that creates objects never stops half-way because of its output: `drill`
/// piped into a reader that has gone (`| true`, as `| head -1` after a line) goes on,
/// cleans up and exits with its own code; writing to a full disk goes on and cleans up
/// too, then exits 74. Either way the cluster is as it was.
/// Before `say!`, the first progress line after the token Secret and the squeeze quota
/// ended the process and left both behind.
#[tokio::test]
async fn a_closed_pipe_or_a_full_disk_never_stops_a_drill_before_it_cleans_up() {
    let sim = crate::common::start_platform(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    // Events are the platform's record of what happened and WorkspaceKinds carry the
    // platform's own counts of Workspaces: neither is wsgate's. Everything else must be as
    // it was after a first drill whose output is read (the add-on's IPC ConfigMap, made for
    // the namespace's first snapshot-enabled Workspace, is there from then on).
    let lasting = |sim: &wsgate::sim::SimHandle| {
        let mut w = world(sim);
        w.retain(|k, _| !k.starts_with("Event ") && !k.starts_with("WorkspaceKind "));
        w
    };
    let mut before = lasting(&sim);
    let bin = env!("CARGO_BIN_EXE_wsgate");
    for (what, redirect) in [
        ("a first drill whose output is read", "> /dev/null"),
        ("a closed pipe", "| true"),
        ("a closed pipe for both outputs", "2>&1 | true"),
        ("a full disk", "> /dev/full"),
    ] {
        let script = format!(
            "'{bin}' drill --target cluster --kubeconfig '{kc}' --namespace wsgate-test \
             --workspaces 2 --gpus 1 --sample 0 --set 'reports.dir={reports}' {redirect}; \
             echo \"code=${{PIPESTATUS[0]}}\" >&2",
            kc = kc.display(),
            reports = dir.path().join("reports").display(),
        );
        let o = bash_within(crate::common::COMMAND_LIMIT_S, script).await;
        let out = text(&o);
        // A full disk fails the drill (74) once it has finished and cleaned up; a closed
        // pipe is the reader's choice and leaves the drill's own code.
        let code = if redirect.contains("full") { 74 } else { 0 };
        assert!(out.contains(&format!("code={code}")), "{what}: {out}");
        assert!(!out.contains("panicked"), "{what}: {out}");
        if redirect.contains("full") {
            assert!(
                out.contains("cannot write to standard output"),
                "{what}: {out}"
            );
        }
        let after = lasting(&sim);
        if redirect == "> /dev/null" {
            before = after;
            continue;
        }
        assert_eq!(changes(&before, &after), Vec::<String>::new(), "{what}");
    }
}

/// A negative number is a value the flag refuses with its range, not an unknown flag
/// (`unexpected argument '-5' found`), for every flag that takes a number or a duration.
#[test]
fn negative_numbers_are_values_refused_with_their_range() {
    let probe = |flag: &'static str, value: &'static str| -> Vec<&'static str> {
        let base = [
            "probe",
            "mark",
            "--url",
            "http://127.0.0.1:9",
            "--state",
            "s",
        ];
        base.into_iter().chain([flag, value]).collect()
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["cost", "--idle-periods", "-5h", "r.json"],
            "`-5h` is not a duration",
        ),
        (probe("--connect-budget", "-5s"), "`-5s` is not a duration"),
        (probe("--cell-budget", "-1"), "`-1` is not a duration"),
        (probe("--model-budget", "-1m"), "`-1m` is not a duration"),
        (
            vec![
                "report",
                "--compare",
                "a.json",
                "b.json",
                "--threshold",
                "-5",
            ],
            "\"-5\" is not a non-negative number",
        ),
        (
            vec![
                "report",
                "--compare",
                "a.json",
                "b.json",
                "--min-delta",
                "-5",
            ],
            "\"-5\" is not a non-negative number",
        ),
        (vec!["sim", "--port", "-1"], "-1 is not a port"),
        (vec!["sim", "--port", "70000"], "70000 is not a port"),
        (
            vec!["drill", "--workspaces", "-3"],
            "-3 is not a whole number",
        ),
        (vec!["drill", "--sample", "-1"], "-1 is not a whole number"),
        (vec!["drill", "--gpus", "-1"], "-1 is not in"),
        (
            vec!["gate", "prepare", "--expires-in-hours", "-1"],
            "--expires-in-hours",
        ),
    ];
    for (args, says) in cases {
        let o = wsgate_within(30, &args, &[]);
        assert_code(&o, wsgate::exit_code::USAGE, says);
        assert!(
            !text(&o).contains("unexpected argument"),
            "{args:?}: {}",
            text(&o)
        );
    }
}

/// A temporary directory that cannot be written is the machine's trouble, said with the
/// path and exit 74, not "a bug in wsgate" (70).
#[test]
fn a_temporary_directory_that_cannot_be_written_is_not_a_bug() {
    let o = wsgate_within(60, &["run"], &[("TMPDIR", "/nonexistent/wsgate-tmp")]);
    assert_code(
        &o,
        wsgate::exit_code::OUTPUT,
        "cannot write the shipped features to a temporary directory",
    );
    assert!(text(&o).contains("/nonexistent/wsgate-tmp"), "{}", text(&o));
}

/// Files that are not what they claim (empty, cut off, binary, another schema) and paths
/// and arguments that cannot be used: each reader names the file and what is wrong with
/// it, with exit 2 (the caller's input) or 3 (the target), before anything is contacted.
#[test]
fn files_that_are_not_what_they_claim_are_named_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    };
    let empty = file("empty.json", b"");
    let cut = file("cut.json", b"{\"schema\": \"wsgate.dev/");
    let binary = file("binary.json", b"\x00\xff\xfe\x01");
    let other = file("other.json", br#"{"schema": "wsgate.dev/probe-state/v0"}"#);
    use wsgate::exit_code::{TARGET, USAGE};
    let url = "http://127.0.0.1:9/";
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["report", &empty], USAGE, "is not a wsgate JSON report"),
        (vec!["report", &cut], USAGE, "is not a wsgate JSON report"),
        (vec!["cost", &binary], USAGE, "not contain valid UTF-8"),
        (
            vec!["gate", "verify", "--state", &empty],
            USAGE,
            "is not a wsgate gate state",
        ),
        (
            vec!["gate", "verify", "--state", &binary],
            USAGE,
            "cannot read the gate state",
        ),
        (
            vec!["probe", "check", "--url", url, "--state", &cut],
            USAGE,
            "is not a wsgate probe state",
        ),
        (
            vec!["probe", "check", "--url", url, "--state", &other],
            USAGE,
            "is not a wsgate probe state",
        ),
        (
            vec![
                "status",
                "--target",
                "cluster",
                "--kubeconfig",
                "/nonexistent/kc.yaml",
            ],
            TARGET,
            "cannot read kubeconfig /nonexistent/kc.yaml",
        ),
    ];
    for (args, code, says) in &cases {
        let o = wsgate_within(30, args, &[]);
        assert_code(&o, *code, says);
    }
    // An argument that is not UTF-8 is refused by name, not a panic.
    use std::os::unix::ffi::OsStrExt;
    let o = crate::common::within(30, env!("CARGO_BIN_EXE_wsgate"))
        .args([
            std::ffi::OsStr::new("run"),
            std::ffi::OsStr::new("--dry-run"),
        ])
        .arg("--name")
        .arg(std::ffi::OsStr::from_bytes(b"\xff\xfe"))
        .output()
        .unwrap();
    assert_code(&o, USAGE, "invalid UTF-8");
}

/// The read-only commands into a reader that has gone and onto a full disk: `status` and
/// `doctor` against a cluster, `report` and `cost` on a report file. A closed pipe ends
/// with 141 (what a shell shows for SIGPIPE), a full disk with 74, each without a panic,
/// and the cluster is exactly as it was.
#[tokio::test]
async fn read_only_commands_into_a_closed_pipe_or_onto_a_full_disk_end_with_their_code() {
    let sim = crate::common::start_platform(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    sim.write_kubeconfig(&kc).unwrap();
    let report = dir.path().join("report.json");
    let json = wsgate::report::json::to_json(&crate::report::fixture::run_a()).unwrap();
    std::fs::write(&report, json).unwrap();
    // WorkspaceKinds carry the platform's own counts, which its controller writes as it
    // settles, and Events are the platform's record: neither is the commands' to change.
    let lasting = |sim: &wsgate::sim::SimHandle| {
        let mut w = world(sim);
        w.retain(|k, _| !k.starts_with("Event ") && !k.starts_with("WorkspaceKind "));
        w
    };
    let before = lasting(&sim);
    let bin = env!("CARGO_BIN_EXE_wsgate");
    let cluster = format!("--target cluster --kubeconfig '{}'", kc.display());
    let commands = [
        format!("status {cluster}"),
        format!("doctor {cluster}"),
        format!("report '{}'", report.display()),
        format!("cost '{}'", report.display()),
    ];
    for command in &commands {
        for (redirect, code, says) in [
            ("| true", wsgate::exit_code::PIPE_CLOSED, ""),
            (
                "> /dev/full",
                wsgate::exit_code::OUTPUT,
                "cannot write to standard output",
            ),
        ] {
            let script =
                format!("'{bin}' {command} {redirect}; echo \"code=${{PIPESTATUS[0]}}\" >&2");
            let o = bash_within(60, script).await;
            let out = text(&o);
            assert!(
                out.contains(&format!("code={code}")),
                "{command} {redirect}: {out}"
            );
            assert!(out.contains(says), "{command} {redirect}: {out}");
            assert!(!out.contains("panicked"), "{command} {redirect}: {out}");
        }
    }
    let changed = changes(&before, &lasting(&sim));
    assert!(changed.is_empty(), "{}", changed.join("\n"));
}

/// A reports directory that cannot be written is found before the run starts anything:
/// exit 74 with the directory and what to do, and no simulator or suite is started.
#[test]
fn a_reports_directory_that_cannot_be_written_stops_the_run_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let under_a_file = file.join("reports").display().to_string();
    for args in [
        vec!["run", "--reports", under_a_file.as_str()],
        vec!["run", "--set", &format!("reports.dir={under_a_file}")],
        vec![
            "drill",
            "--workspaces",
            "2",
            "--gpus",
            "1",
            "--reports",
            under_a_file.as_str(),
        ],
    ] {
        let o = wsgate_within(30, &args, &[]);
        assert_code(&o, wsgate::exit_code::OUTPUT, "choose another --reports");
        let out = text(&o);
        assert!(out.contains(&under_a_file), "{out}");
        assert!(!out.contains("run id"), "the run started:\n{out}");
    }
    // `report --out` the same: 74, naming the directory and the flag.
    let report = dir.path().join("report.json");
    let json = wsgate::report::json::to_json(&crate::report::fixture::run_a()).unwrap();
    std::fs::write(&report, json).unwrap();
    let r = report.display().to_string();
    let o = wsgate_within(30, &["report", &r, "--out", &under_a_file], &[]);
    assert_code(&o, wsgate::exit_code::OUTPUT, "choose another --out");
    assert!(text(&o).contains(&under_a_file), "{}", text(&o));
}
